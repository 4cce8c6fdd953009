"""The Aokun panel: a local web page to see and tune a memory store (`aokun panel`)."""
