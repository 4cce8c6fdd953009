"""`aokun`: the admin command line, and the commands it runs (doctor, import, hooks, run...)."""
