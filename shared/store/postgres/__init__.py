"""The store on PostgreSQL (storage.backend: postgresql): team mode's second engine."""
