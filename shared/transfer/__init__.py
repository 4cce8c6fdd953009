"""Import and export: your memories are yours.

Pure parsing is kept apart from writing:
- rows.py: what every reader yields — a Row to memorize, or a BadRow to report and skip;
- jsonl.py: our own JSONL (one memory a line, behind a header line), both ways;
- mcp_memory.py: the official MCP memory server's memory.jsonl (entities with observations,
  relations) as rows;
- markdown.py: a folder of Markdown notes as rows;
- chats.py: ChatGPT's and Claude's conversations.json, a conversation at a time, as turns
  (each summarized into one memory by aokun_admin/chat_import.py);
- json_array.py: the items of a JSON array file read one at a time, with their byte offsets;
- position.py: where an import of a large file got to, to resume it there;
- render.py: a persona's memories as one readable Markdown file;
- sources.py: which format a file holds, and its rows;
- importer.py: rows written through the memory service, once each (source_hash);
- export.py: memories read from the store and written as JSONL or Markdown.
"""
