"""What both engines run: SQL typed against the `Connection` protocol (connection.py) and the
aggregates whose methods run only such SQL (aggregates.py), which each engine's aggregates
subclass."""
