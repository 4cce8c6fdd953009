"""Business rules over the store: what reinforcement, superseding and validity mean."""
