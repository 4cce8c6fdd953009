"""The API schema the MCP front and the panel share: the models of what a memory looks like
from outside, how a refused request reads, and the pipeline figures memory_stats reports."""
