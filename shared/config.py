"""Configuration: the config file read into frozen, validated dataclasses.

Every option has a default here and a commented line in config.example.yaml. Sections and
keys are checked strictly: an unknown key or a bad value stops start-up with a message that
names the key and what is allowed.

A process loads the file at its entry point and keeps it in a LiveConfig
(shared/live_config.py), which replaces the whole AppConfig when the file changes. Parts read
their settings through it, and the call site shows whether a value is live: `live.now.<section>
.<key>` where the value is used, or `live.at_start.<section>.<key>` for the keys in
RESTART_SECTIONS / RESTART_KEYS below, which keep their start value for the process's life.

A secret is the value of its key, else the environment variable its `*_env` key names
(`secret` below): the one place that is decided.
"""

from __future__ import annotations

import dataclasses
import math
import os
import re
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, get_args

from shared import time_zone
from shared.errors import ConfigError
from shared.units import DAY

CONFIG_ENV = "AOKUN_CONFIG"
TOKEN_ENV = "AOKUN_SERVER_TOKEN"
# A user's token for a stdio front (aokun_server/identity.py): the server acts as that user.
LOCAL_TOKEN_ENV = "AOKUN_TOKEN"
DEFAULT_CONFIG_NAME = "config.yaml"

ALL_TOOLS = (
    "memorize",
    "summarize_memory",
    "recall",
    "list_memories",
    "edit_memory",
    "delete_memory",
    "pin_memory",
    "memory_stats",
    "search_atoms",
    "memory_maintenance",
)


# The longest value a string key takes, and a list of strings (its entries, each at most
# MAX_TEXT_CHARS, together).
MAX_TEXT_CHARS = 2_000
MAX_LIST_CHARS = 100_000
MAX_PATH_CHARS = 4_096
MAX_ID_CHARS = 200  # the longest session_id or persona_id (shared/memory_rules.py)
# How much of a refused value a message shows.
SHOWN_CHARS = 60


MAX_WEIGHT = 100.0  # weights, boosts and penalties: any larger is a typo, not a tuning


def _weight(default: float) -> Any:
    """A weight field: a finite number from 0 to MAX_WEIGHT."""
    return _opt(default, minimum=0.0, maximum=MAX_WEIGHT)


def _opt(default: Any, *, choices: tuple = (), minimum: float | None = None,
         maximum: float | None = None, subset_of: tuple = (), nonempty: bool = False) -> Any:
    """A dataclass field with validation rules kept beside its default. Every number has a
    minimum and a maximum (tests/test_config.py holds every key to it), and must be finite;
    a list that is `nonempty` needs an entry."""
    rules = {"choices": choices, "min": minimum, "max": maximum, "subset_of": subset_of,
             "nonempty": nonempty}
    if isinstance(default, (list, tuple)):
        return field(default=tuple(default), metadata=rules)
    return field(default=default, metadata=rules)


# Where the store lives (shared/store/__init__.py: open_store).
STORAGE_BACKENDS = ("sqlite", "postgresql")


@dataclass(frozen=True)
class StorageConfig:
    data_dir: Path = _opt(Path("data"))
    busy_timeout_ms: int = _opt(10_000, minimum=0, maximum=600_000)
    synchronous: str = _opt("full", choices=("full", "normal"))
    # Where the memories live: sqlite, one file in data_dir (one machine); postgresql, a
    # server at `url` that fronts and workers on several machines share (team mode). With
    # postgresql, data_dir keeps only this process's local caches (vector index snapshots).
    backend: str = _opt("sqlite", choices=STORAGE_BACKENDS)
    url: str = _opt("")
    # postgresql: the environment variable holding the password when the URL has none.
    password_env: str = _opt("AOKUN_STORAGE_PASSWORD")
    # postgresql: connections this process keeps open at most.
    pool_size: int = _opt(8, minimum=1, maximum=200)

    @property
    def db_path(self) -> Path:
        return self.data_dir / "aokun.db"

    @property
    def queue_path(self) -> Path:
        return self.data_dir / "queue.db"


@dataclass(frozen=True)
class TextConfig:
    user_words: tuple[str, ...] = _opt(())
    stop_words: tuple[str, ...] = _opt(())


@dataclass(frozen=True)
class ServerConfig:
    transport: str = _opt("stdio", choices=("stdio", "http"))
    host: str = _opt("127.0.0.1")
    port: int = _opt(8000, minimum=1, maximum=65535)
    token: str = _opt("")
    exposed_tools: tuple[str, ...] = _opt(
        ("memorize", "recall", "list_memories", "edit_memory"), subset_of=ALL_TOOLS)
    max_content_chars: int = _opt(20_000, minimum=1, maximum=1_000_000)
    log_level: str = _opt("WARNING", choices=("DEBUG", "INFO", "WARNING", "ERROR"))
    # HTTP: an MCP session with no request in flight and no stream open for this long is
    # closed (its client initializes again); a token holds at most max_sessions_per_token
    # open sessions, one more is refused (aokun_server/sessions.py).
    session_idle_timeout_s: float = _opt(600.0, minimum=1.0, maximum=DAY)
    max_sessions_per_token: int = _opt(32, minimum=1, maximum=10_000)


@dataclass(frozen=True)
class MemoryConfig:
    recall_top_k: int = _opt(5, minimum=1, maximum=100)
    recall_max_k: int = _opt(15, minimum=1, maximum=100)
    # A memory is indexed with the memories stored just before it in its conversation (same
    # persona and session, or without a session the same dialogue's participants or speaker
    # turns; each within context_window_s of the next): shared/store/portable/neighbours.py.
    context_turns: int = _opt(2, minimum=0, maximum=8)
    context_window_s: float = _opt(1800.0, minimum=0.0, maximum=30 * DAY)
    # The user's clock (shared/time_zone.py): "3pm", "tomorrow", a date or time given without
    # an offset are read on it, and times are shown on it. An IANA name (America/Los_Angeles),
    # UTC, or an offset (+08:00); "" is the machine's own zone.
    time_zone: str = _opt("")
    # Whose a memory is when a write names no persona (memorize, summarize_memory, aokun
    # ingest), and the persona the panel's graph opens on: "" is no persona, where a store
    # whose memories never named one already keeps them. Reads without a persona cover every
    # persona the caller holds, this one included (shared/access.py).
    default_persona: str = _opt("")

    @property
    def default_persona_id(self) -> str | None:
        """default_persona as a persona_id (None: no persona)."""
        return self.default_persona or None


CHANNELS = ("bm25", "vector", "graph_keyword", "graph_vector")
# How a route's channels are fused (shared/search/fuse.py): standardised scores, min-max scores,
# or reciprocal rank fusion.
FUSIONS = ("zscore", "score", "rrf")
# Where the job queue's messages live (shared/queue.py).
QUEUE_BACKENDS = ("sqlite", "redis")
# Who summarizes a conversation (shared/summarize/): the offline rules, or the configured model.
SummarizerProvider = Literal["rules", "llm"]
SUMMARIZER_PROVIDERS: tuple[str, ...] = get_args(SummarizerProvider)

# Keys a running process cannot take over from a changed file: they shape what was opened or
# built at start (files, sockets, models, thread pools, tokenizers). A change to one is
# reported as "needs a restart" and not applied; every other key applies live.
RESTART_SECTIONS = frozenset({"storage", "text", "embedding"})
RESTART_KEYS = frozenset({
    "server.transport", "server.host", "server.port", "server.token",
    "worker.threads", "worker.heartbeat_interval_s", "worker.poll_interval_s",
    "atoms.rules_file", "graph.aliases", "graph.max_topics", "summarizer.max_concurrent",
    "queue.backend", "queue.url", "queue.name", "queue.password_env",
})


# Keys whose values are never shown or logged (the panel shows "set" / "not set").
# queue.url and storage.url may carry a password (redis://:secret@host:6379/0).
SECRET_KEYS = frozenset({"server.token", "embedding.api_key", "summarizer.api_key", "queue.url",
                         "storage.url"})


def secret(value: str, env_name: str, env: typing.Mapping[str, str] | None = None) -> str:
    """A secret from the config: `value` when set, else the environment variable `env_name`
    names ("" when neither is set, or `env_name` is empty)."""
    if value:
        return value
    env = os.environ if env is None else env
    return env.get(env_name, "") if env_name else ""


def needs_restart(key: str) -> bool:
    """Whether a change to `section.key` only takes effect after a restart."""
    return key.split(".", 1)[0] in RESTART_SECTIONS or key in RESTART_KEYS


@dataclass(frozen=True)
class RetrievalConfig:
    channels: tuple[str, ...] = _opt(CHANNELS, subset_of=CHANNELS, nonempty=True)
    fallback_enabled: bool = _opt(True)
    query_focus: bool = _opt(True)
    rrf_k: int = _opt(60, minimum=1, maximum=1000)
    candidate_depth: int = _opt(30, minimum=1, maximum=1000)
    # results whose score (the estimated probability that a memory is relevant) is below
    # this are left out, so a recall may answer nothing; recall's min_score overrides it.
    # Chosen on held-out folds (scripts/calibrate.py; figures in docs/performance.md).
    min_score: float = _opt(0.015, minimum=0.0, maximum=1.0)
    # a recall whose best result scores below this answers nothing. Off by default: a memory
    # found by meaning alone, with no word in common ("kitten" for a cat), scores no more than
    # the best of a question about something never said, so a floor here drops such matches
    # (the question-level floor below decides whether to answer at all).
    min_best_score: float = _opt(0.0, minimum=0.0, maximum=1.0)
    # Answer nothing when the store is less likely than this to hold an answer to the question
    # at all (shared/search/calibration.py: a model of the question's strongest evidence, apart
    # from how its candidates rank). Chosen on folds for every local embedder at once
    # (scripts/calibrate.py --pool). A recall that gives its own min_score asks for exactly
    # that floor, not this one.
    min_answerable: float = _opt(0.06, minimum=0.0, maximum=1.0)
    # document route: channels fused (zscore: each channel standardised by its own score
    # spread, then weighted; score: weighted min-max; rrf: reciprocal rank fusion),
    # then final = fused * a + importance * b + recency * g
    doc_fusion: str = _opt("zscore", choices=FUSIONS)
    bm25_weight: float = _weight(0.6)
    # a query term found in a memory's conversation context (memory.context_turns) counts
    # this many times one found in its own text (0.5 chosen on every held-out LoCoMo fold
    # from 0.25-1.0, with 2 turns of context against 1 and 3)
    bm25_context_weight: float = _weight(0.5)
    vector_weight: float = _weight(0.4)
    doc_rrf_weight: float = _weight(0.5)
    doc_importance_weight: float = _weight(0.25)
    doc_recency_weight: float = _weight(0.25)
    recency_days: float = _opt(30.0, minimum=0.001, maximum=36_500.0)
    mmr_enabled: bool = _opt(False)
    mmr_lambda: float = _opt(0.7, minimum=0.0, maximum=1.0)
    # graph route: channels fused like the document route's, then
    # final = (rrf * a + importance * b + recency * g + confidence * d) x temporal factor
    graph_fusion: str = _opt("zscore", choices=FUSIONS)
    graph_keyword_weight: float = _weight(0.5)
    graph_vector_weight: float = _weight(0.8)
    graph_rrf_weight: float = _weight(0.55)
    graph_importance_weight: float = _weight(0.20)
    graph_recency_weight: float = _weight(0.15)
    # The best confidence among a memory's graph entries is how sure the atom rules are of a
    # fact's type, not of its relevance: 0 chosen on pooled held-out folds (every fold of the
    # three sets; figures in docs/performance.md)
    graph_confidence_weight: float = _weight(0.0)
    graph_entry_weight: float = _weight(1.0)
    graph_node_weight: float = _weight(0.7)
    graph_hop1_weight: float = _weight(0.7)
    graph_hop2_weight: float = _weight(0.4)
    graph_multi_entry_boost: float = _weight(0.35)
    graph_expansion_hops: int = _opt(2, minimum=0, maximum=2)
    graph_expansion_limit: int = _opt(24, minimum=0, maximum=1000)
    # dual-route fusion and intent routing
    document_route_weight: float = _weight(0.65)
    graph_route_weight: float = _weight(0.1)
    both_routes_bonus: float = _weight(0.08)
    relational_graph_boost: float = _weight(0.20)
    temporal_graph_boost: float = _weight(0.0)
    factual_document_boost: float = _weight(0.15)
    relational_cues: tuple[str, ...] = _opt((
        "who", "whom", "relationship", "related", "friend", "friends", "colleague", "coworker",
        "partner", "family", "know each other", "谁", "关系", "朋友", "同事", "家人", "认识"))
    temporal_cues: tuple[str, ...] = _opt((
        "when", "last time", "yesterday", "ago", "before", "after", "recently", "date",
        "上次", "昨天", "什么时候", "以前", "之前", "最近", "哪天"))
    factual_cues: tuple[str, ...] = _opt((
        "what is", "what's", "why", "how does", "how do", "difference", "define", "explain",
        "是什么", "为什么", "区别", "怎么", "如何"))
    # atoms in recall: a query with a preference cue (likes, dislikes) or a plan cue adds
    # atom_type_boost to the fused score of each candidate holding a still-valid atom of that
    # type (preference, planned), before calibration. 0.02 chosen on pooled held-out folds
    # (every fold but one; 0.05 and up cost MADial en). Its effect is small: most of what
    # MADial's users like is told as an event and typed episodic
    atom_type_boost: float = _opt(0.02, minimum=0.0, maximum=1.0)
    preference_cues: tuple[str, ...] = _opt((
        "like", "likes", "liked", "love", "loves", "enjoy", "enjoys", "favorite", "favourite",
        "prefer", "prefers", "hate", "hates", "dislike", "dislikes", "fan of", "hobby", "hobbies",
        "喜欢", "爱好", "最爱", "讨厌", "偏好", "兴趣", "爱吃", "爱玩", "爱看"))
    plan_cues: tuple[str, ...] = _opt((
        "plan", "plans", "planning", "going to", "will", "gonna", "intend", "upcoming", "schedule",
        "tomorrow", "next week", "打算", "计划", "准备", "安排", "明天", "下周", "将要"))
    # a memory stored as one "Name: text" turn: + named_speaker_boost when the query names its
    # speaker (what someone said answers a question about them), - question_turn_penalty when
    # it ends in a question (it asks; the turn answering it states the fact). 0.08 and 0.1
    # chosen together on pooled held-out folds (figures in docs/performance.md; adversarial
    # questions, which name the wrong person, lose a little; MADial's memories are not turns)
    named_speaker_boost: float = _opt(0.08, minimum=0.0, maximum=1.0)
    question_turn_penalty: float = _opt(0.1, minimum=0.0, maximum=1.0)
    # a question that names an entity and a relation ("Tomas's fiancée", 王芳的丈夫): + relation_boost,
    # times how sure the resolution is and how specific the entity, to the memories about the
    # entity the relation leads to (shared/search/relation_route.py)
    relation_boost: float = _opt(1.0, minimum=0.0, maximum=2.0)
    # around it
    cache_enabled: bool = _opt(True)
    cache_ttl_s: float = _opt(45.0, minimum=0.0, maximum=DAY)
    cache_size: int = _opt(256, minimum=1, maximum=100_000)
    access_reinforcement: bool = _opt(True)


@dataclass(frozen=True)
class AtomsConfig:
    rules_file: Path | None = _opt(None)
    ttl_episodic_days: float = _opt(7.0, minimum=0.0, maximum=36_500.0)
    ttl_planned_days: float = _opt(2.0, minimum=0.0, maximum=36_500.0)
    ttl_factual_days: float = _opt(180.0, minimum=0.0, maximum=36_500.0)
    ttl_relational_days: float = _opt(90.0, minimum=0.0, maximum=36_500.0)
    ttl_preference_days: float = _opt(60.0, minimum=0.0, maximum=36_500.0)
    ttl_unknown_days: float = _opt(30.0, minimum=0.0, maximum=36_500.0)
    reinforce_jaccard: float = _opt(0.6, minimum=0.0, maximum=1.0)

    def base_ttl_days(self, atom_type: str) -> float:
        return getattr(self, f"ttl_{atom_type}_days")


@dataclass(frozen=True)
class GraphConfig:
    aliases: tuple[str, ...] = _opt(())
    max_topics: int = _opt(3, minimum=0, maximum=20)

    def alias_map(self) -> dict[str, str]:
        """{alias: canonical name} from "alias=canonical" entries."""
        pairs = (entry.split("=", 1) for entry in self.aliases)
        return {alias.strip(): name.strip() for alias, name in pairs}


@dataclass(frozen=True)
class ForgettingConfig:
    decay_rate: float = _opt(0.01, minimum=0.0, maximum=1.0)
    decay_hour: int = _opt(0, minimum=0, maximum=23)
    decay_minute: int = _opt(5, minimum=0, maximum=59)
    access_decay_window_days: float = _opt(30.0, minimum=0.0, maximum=3650.0)
    access_count_decay_multiplier: float = _opt(0.5, minimum=0.0, maximum=1.0)
    auto_cleanup_enabled: bool = _opt(True)
    cleanup_days_threshold: float = _opt(180.0, minimum=0.0, maximum=36_500.0)
    cleanup_importance_threshold: float = _opt(0.1, minimum=0.0, maximum=1.0)
    atom_maintenance_interval_hours: float = _opt(24.0, minimum=0.01, maximum=8760.0)
    atom_forget_delay_days: float = _opt(7.0, minimum=0.0, maximum=3650.0)
    atom_purge_delay_days: float = _opt(30.0, minimum=0.0, maximum=3650.0)


@dataclass(frozen=True)
class BackupConfig:
    dir: Path | None = _opt(None)
    keep_days: float = _opt(7.0, minimum=0.0, maximum=3650.0)
    daily: bool = _opt(True)


@dataclass(frozen=True)
class WorkerConfig:
    threads: int = _opt(2, minimum=1, maximum=32)
    autostart: bool = _opt(True)
    heartbeat_interval_s: float = _opt(5.0, minimum=0.1, maximum=300.0)
    poll_interval_s: float = _opt(0.25, minimum=0.01, maximum=5.0)
    # An autostarted worker exits once no front has been alive this long and no work is
    # pending (0 = never); workers started by hand never do.
    idle_exit_s: float = _opt(600.0, minimum=0.0, maximum=7 * DAY)

    @property
    def heartbeat_timeout_s(self) -> float:
        """A worker whose newest heartbeat is older than this is taken for dead."""
        return max(3 * self.heartbeat_interval_s, 2.0)


@dataclass(frozen=True)
class QueueConfig:
    # Where the queue's messages live (shared/queue.py): sqlite, a file in data_dir (one
    # machine); redis, a Redis server at `url` that workers on several machines share.
    backend: str = _opt("sqlite", choices=QUEUE_BACKENDS)
    url: str = _opt("")
    # redis: the queue's name in Redis (its keys are huey.*.<name>); deployments sharing one
    # Redis server (and database) each need their own.
    name: str = _opt("aokun")
    # redis: the environment variable holding the password when the URL has none.
    password_env: str = _opt("AOKUN_QUEUE_PASSWORD")
    max_retries: int = _opt(8, minimum=1, maximum=10_000)
    retry_base_s: float = _opt(5.0, minimum=0.0, maximum=3600.0)
    retry_max_s: float = _opt(600.0, minimum=0.0, maximum=DAY)
    lease_s: float = _opt(300.0, minimum=1.0, maximum=DAY)
    reconcile_interval_s: float = _opt(180.0, minimum=1.0, maximum=DAY)
    embed_batch_size: int = _opt(16, minimum=1, maximum=512)


@dataclass(frozen=True)
class EmbeddingConfig:
    provider: str = _opt("local", choices=("local", "openai"))
    local_model: str = _opt("auto", choices=("auto", "e5", "use"))
    threads: int = _opt(0, minimum=0, maximum=64)
    base_url: str = _opt("")
    model: str = _opt("")
    dimensions: int = _opt(0, minimum=0, maximum=65_536)
    api_key: str = _opt("")
    api_key_env: str = _opt("AOKUN_EMBEDDING_API_KEY")
    batch_size: int = _opt(32, minimum=1, maximum=2048)
    timeout_s: float = _opt(30.0, minimum=0.1, maximum=3600.0)
    max_retries: int = _opt(4, minimum=0, maximum=20)


@dataclass(frozen=True)
class SummarizerConfig:
    provider: str = _opt("rules", choices=SUMMARIZER_PROVIDERS)
    base_url: str = _opt("")
    model: str = _opt("")
    api_key: str = _opt("")
    api_key_env: str = _opt("AOKUN_SUMMARIZER_API_KEY")
    timeout_s: float = _opt(60.0, minimum=0.1, maximum=3600.0)
    max_retries: int = _opt(3, minimum=0, maximum=20)
    summary_chars: int = _opt(1200, minimum=100, maximum=20_000)
    max_key_facts: int = _opt(24, minimum=1, maximum=64)
    # llm: calls waiting on the model at once per front; 4x as many more may queue, the rest
    # are refused "busy" (aokun_server/tools/model_calls.py)
    max_concurrent: int = _opt(4, minimum=1, maximum=32)


@dataclass(frozen=True)
class AppConfig:
    storage: StorageConfig = field(default_factory=StorageConfig)
    text: TextConfig = field(default_factory=TextConfig)
    server: ServerConfig = field(default_factory=ServerConfig)
    memory: MemoryConfig = field(default_factory=MemoryConfig)
    retrieval: RetrievalConfig = field(default_factory=RetrievalConfig)
    atoms: AtomsConfig = field(default_factory=AtomsConfig)
    graph: GraphConfig = field(default_factory=GraphConfig)
    forgetting: ForgettingConfig = field(default_factory=ForgettingConfig)
    backup: BackupConfig = field(default_factory=BackupConfig)
    worker: WorkerConfig = field(default_factory=WorkerConfig)
    queue: QueueConfig = field(default_factory=QueueConfig)
    embedding: EmbeddingConfig = field(default_factory=EmbeddingConfig)
    summarizer: SummarizerConfig = field(default_factory=SummarizerConfig)
    source: Path | None = None

    @property
    def backup_dir(self) -> Path:
        """Where backups go: backup.dir, else data_dir/backups."""
        return self.backup.dir or self.storage.data_dir / "backups"


# Folders that are the system's, never a data folder: the folder itself, or anything inside.
_SYSTEM_TREES = ("/etc", "/bin", "/sbin", "/boot", "/dev", "/proc", "/sys", "/usr/bin", "/usr/sbin",
                 "/usr/lib", "/usr/lib32", "/usr/lib64", "/usr/libexec", "/usr/include", "/usr/share",
                 "/private/etc", "/System", "/Library/Apple")
# Folders that hold others' folders: not one of them itself (a folder inside is fine).
_SYSTEM_ROOTS = ("/", "/usr", "/usr/local", "/var", "/var/lib", "/opt", "/home", "/root", "/tmp",
                 "/mnt", "/media", "/srv", "/run", "/private", "/private/var", "/private/tmp",
                 "/Users", "/Library", "/Applications", "/Volumes")


def folder_problem(folder: Path) -> str | None:
    """Why `folder` (absolute, resolved) cannot be a data folder, or None: a system folder, the
    user's home itself, or one this process cannot write in (or create in its parent)."""
    if _is_system_folder(folder):
        return "is a system folder; choose a folder of its own for Aokun's data (e.g. ~/aokun-data)"
    try:
        home = Path.home().resolve()
    except (RuntimeError, OSError):  # no home to be found
        home = None
    if folder == home:
        return "is your home folder itself; choose a folder inside it (e.g. ~/aokun-data)"
    existing = folder
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        return None  # a file in the way: opening the store says so ("cannot create data_dir")
    if not os.access(existing, os.W_OK | os.X_OK):
        what = "writable" if existing == folder else f"creatable ({existing} is not writable)"
        return f"is not {what} by this user; make it writable for this user or choose another folder"
    return None


def _is_system_folder(folder: Path) -> bool:
    if os.name == "nt":
        windows = Path(os.environ.get("SystemRoot", r"C:\Windows")).resolve()
        drive_root = Path(folder.anchor)
        program_files = [Path(p).resolve() for p in (os.environ.get("ProgramFiles"),
                         os.environ.get("ProgramFiles(x86)"), os.environ.get("ProgramData")) if p]
        users = drive_root / "Users"
        return (folder == drive_root or folder == users or folder == windows or windows in folder.parents
                or any(folder == p or p in folder.parents for p in program_files))
    text = folder.as_posix()
    if text in _SYSTEM_ROOTS:
        return True
    top = folder.parts[1] if len(folder.parts) > 1 else ""
    if top.startswith("lib"):  # /lib, /lib32, /lib64, /libx32
        return True
    return any(text == tree or text.startswith(tree + "/") for tree in _SYSTEM_TREES)


def find_config_file(explicit: str | os.PathLike | None, env: typing.Mapping[str, str]) -> Path | None:
    """--config, else $AOKUN_CONFIG, else ./config.yaml if present, else None (defaults)."""
    named = explicit or env.get(CONFIG_ENV)
    if named:
        path = Path(named).expanduser()
        if not path.is_file():
            raise ConfigError(f"config file not found: {path}")
        return path.resolve()
    local = Path.cwd() / DEFAULT_CONFIG_NAME
    return local.resolve() if local.is_file() else None


def load_config(explicit: str | os.PathLike | None = None,
                env: typing.Mapping[str, str] | None = None) -> AppConfig:
    """Find, parse and validate the configuration; the only place that reads it."""
    env = os.environ if env is None else env
    path = find_config_file(explicit, env)
    raw: dict = {}
    if path is not None:
        raw = _read_yaml(path)
    base_dir = path.parent if path is not None else Path.cwd()
    config = build_config(raw, base_dir)
    token = env.get(TOKEN_ENV)
    if token:
        config = dataclasses.replace(config, server=dataclasses.replace(config.server, token=token))
    return dataclasses.replace(config, source=path)


def _read_yaml(path: Path) -> dict:
    # Lazy imports: PyYAML only when a file is read (every hook call imports this module).
    import yaml

    from shared.safe_yaml import safe_load

    try:
        raw = safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise ConfigError(f"cannot read config file {path}: {exc}") from exc
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise ConfigError(f"config file {path} must hold a mapping of sections")
    return raw


def build_config(raw: dict, base_dir: Path) -> AppConfig:
    """Validate a parsed mapping into AppConfig; relative paths resolve against base_dir."""
    sections = {f.name: f for f in dataclasses.fields(AppConfig) if f.name != "source"}
    built = {}
    for name, value in raw.items():
        if name not in sections:
            raise ConfigError(f"unknown config section {name!r}; allowed: {', '.join(sections)}")
        if value is None:
            value = {}
        if not isinstance(value, dict):
            raise ConfigError(f"config section {name!r} must be a mapping of keys")
        built[name] = _build_section(name, _section_type(sections[name]), value, base_dir)
    for name, f in sections.items():
        if name not in built:
            built[name] = _build_section(name, _section_type(f), {}, base_dir)
    config = AppConfig(**built)
    _check_cross_rules(config)
    return config


def _section_type(f: dataclasses.Field) -> type:
    return typing.cast(type, f.default_factory)  # a section's default is made by its class


def _build_section(section: str, cls: type, values: dict, base_dir: Path) -> Any:
    hints = typing.get_type_hints(cls)
    known = {f.name: f for f in dataclasses.fields(cls)}
    kwargs = {}
    for key, value in values.items():
        if key not in known:
            raise ConfigError(f"unknown config key {section}.{key}; allowed: {', '.join(known)}")
        kwargs[key] = _coerce(f"{section}.{key}", hints[key], value, known[key].metadata)
    for key, f in known.items():
        if hints[key] in (Path, Path | None):
            raw_path = kwargs.get(key, f.default)
            if raw_path is not None:
                kwargs[key] = (base_dir / Path(raw_path).expanduser()).resolve()
    return cls(**kwargs)


def _coerce(key: str, hint: Any, value: Any, rules: typing.Mapping) -> Any:
    if hint is bool:
        if not isinstance(value, bool):
            raise ConfigError(f"{key} must be true or false, got {shown(value)}")
        return value
    if hint in (int, float):
        ok = isinstance(value, int) if hint is int else isinstance(value, (int, float))
        if isinstance(value, bool) or not ok:
            raise ConfigError(f"{key} must be a{'n integer' if hint is int else ' number'}, got {shown(value)}")
        if not math.isfinite(value):
            raise ConfigError(f"{key} must be a finite number, got {value}")
        _check_range(key, value, rules)
        return hint(value)
    if hint in (Path, Path | None):
        if value is None or value == "":
            if hint is Path:
                raise ConfigError(f"{key} must be a non-empty path string, got {shown(value)}")
            return None
        if not isinstance(value, str) or not value.strip():
            raise ConfigError(f"{key} must be a path string, got {shown(value)}")
        _check_length(key, value, MAX_PATH_CHARS)
        if "\0" in value:
            raise ConfigError(f"{key} must not hold a NUL character")
        return value
    if hint is str:
        if not isinstance(value, str):
            raise ConfigError(f"{key} must be a string, got {shown(value)}")
        _check_length(key, value, MAX_TEXT_CHARS)
        choices = rules.get("choices") or ()
        if choices and value not in choices:
            raise ConfigError(f"{key} must be one of {', '.join(choices)}; got {shown(value)}")
        return value
    if typing.get_origin(hint) is tuple:
        return _coerce_str_list(key, value, rules)
    raise ConfigError(f"{key}: unsupported option type {hint}")  # a programming error


def _coerce_str_list(key: str, value: Any, rules: typing.Mapping) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"{key} must be a list of strings, got {shown(value)}")
    for number, entry in enumerate(value, 1):
        _check_length(f"{key} entry {number}", entry, MAX_TEXT_CHARS)
    total = sum(len(v) for v in value)
    if total > MAX_LIST_CHARS:
        raise ConfigError(f"{key} holds {total} characters in {len(value)} entries; "
                          f"at most {MAX_LIST_CHARS} are allowed")
    if rules.get("nonempty") and not value:
        raise ConfigError(f"{key} must name at least one entry" + (
            f" of: {', '.join(rules['subset_of'])}" if rules.get("subset_of") else ""))
    allowed = rules.get("subset_of") or ()
    bad = [v for v in value if allowed and v not in allowed]
    if bad:
        raise ConfigError(f"{key}: unknown value(s) {cut(', '.join(bad))}; allowed: {', '.join(allowed)}")
    return tuple(value)


def _check_range(key: str, value: float, rules: typing.Mapping) -> None:
    low, high = rules.get("min"), rules.get("max")
    if low is not None and value < low:
        raise ConfigError(f"{key} must be >= {low}, got {value}")
    if high is not None and value > high:
        raise ConfigError(f"{key} must be <= {high}, got {value}")


def _check_length(key: str, value: str, limit: int) -> None:
    if len(value) > limit:
        raise ConfigError(f"{key} is {len(value)} characters long; at most {limit} are allowed "
                          f"(it starts {shown(value)})")


def shown(value: Any) -> str:
    """A value as a message shows it: its repr on one line, cut to SHOWN_CHARS characters
    with its full length said (a 1 MB value is not echoed back)."""
    return cut(repr(value))


def cut(text: str) -> str:
    """text, or its first SHOWN_CHARS characters and its length."""
    if len(text) <= SHOWN_CHARS:
        return text
    return f"{text[:SHOWN_CHARS]}... ({len(text)} characters)"


def _check_cross_rules(config: AppConfig) -> None:
    for key, folder in (("storage.data_dir", config.storage.data_dir), ("backup.dir", config.backup.dir)):
        problem = folder_problem(folder) if folder is not None else None
        if problem:
            raise ConfigError(f"{key} {folder} {problem}")
    embedding = config.embedding
    if embedding.provider == "openai" and not (embedding.base_url and embedding.model):
        raise ConfigError("embedding.provider openai needs embedding.base_url and embedding.model")
    summarizer = config.summarizer
    if summarizer.provider == "llm" and not (summarizer.base_url and summarizer.model):
        raise ConfigError("summarizer.provider llm needs summarizer.base_url and summarizer.model")
    zone_problem = time_zone.problem(config.memory.time_zone)
    if zone_problem:
        raise ConfigError(f"memory.time_zone {zone_problem}; got {shown(config.memory.time_zone)}")
    _check_storage(config.storage)
    _check_queue(config.queue)
    bad_aliases = [a for a in config.graph.aliases if "=" not in a or not all(p.strip() for p in a.split("=", 1))]
    if bad_aliases:
        raise ConfigError(f"graph.aliases entries must look like alias=name; got {cut(', '.join(bad_aliases))}")
    _check_default_persona(config.memory.default_persona)
    if config.memory.recall_top_k > config.memory.recall_max_k:
        raise ConfigError(
            f"memory.recall_top_k ({config.memory.recall_top_k}) must not exceed "
            f"memory.recall_max_k ({config.memory.recall_max_k})")


def _check_default_persona(persona: str) -> None:
    """A default persona is a name as memorize takes one (its "null"-word rule is checked where
    a memory is written), or "" for none."""
    if persona and (persona != persona.strip() or len(persona) > MAX_ID_CHARS):
        raise ConfigError(f"memory.default_persona must be a persona name of 1 to {MAX_ID_CHARS} "
                          f"characters without surrounding spaces, or \"\" for none; got {shown(persona)}")


def _check_storage(storage: StorageConfig) -> None:
    if storage.backend != "postgresql":
        return
    example = "e.g. postgresql://aokun@db.example:5432/aokun"
    if not storage.url:
        raise ConfigError(f"storage.backend postgresql needs storage.url, {example}")
    scheme = storage.url.split("://", 1)[0].lower() if "://" in storage.url else ""
    if scheme not in ("postgresql", "postgres"):
        raise ConfigError(f"storage.url must be a postgresql:// URL, {example}")


def _check_queue(queue: QueueConfig) -> None:
    if queue.backend != "redis":
        return
    if not queue.url:
        raise ConfigError("queue.backend redis needs queue.url, e.g. redis://127.0.0.1:6379/0")
    scheme = queue.url.split("://", 1)[0].lower() if "://" in queue.url else ""
    if scheme not in ("redis", "rediss", "unix"):
        raise ConfigError("queue.url must be a redis://, rediss:// or unix:// URL, e.g. "
                          "redis://127.0.0.1:6379/0")
    if not re.fullmatch(r"[A-Za-z0-9_]{1,64}", queue.name):
        raise ConfigError(f"queue.name must be 1 to 64 letters, digits or underscores; got {shown(queue.name)}")


HOW_TO_POINT = (f"pass --config FILE, set {CONFIG_ENV}=FILE, or run it in the folder holding "
                f"{DEFAULT_CONFIG_NAME} (scripts/run creates one from config.example.yaml)")


def require_config_file(config: AppConfig, why: str = "") -> None:
    """Refuse built-in defaults: ConfigError (exit 2, one line) when no file was read."""
    if config.source is None:
        raise ConfigError(f"no config file found: {HOW_TO_POINT}" + (f", {why}" if why else ""))
