"""What the four process packages (front, worker, admin CLI, panel) share: config, the store,
text, extraction, search, the memory service, and the assembly that puts a process together."""

__version__ = "0.1.0"
