"""Aokun background workers: a Huey consumer that runs the slow stages of each memory."""
