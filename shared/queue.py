"""The job queue: Huey over its own SQLite file, kept apart from the main database, or over a
Redis server (queue.backend redis) that workers on several machines share.

Huey's tables have generic names and it deletes a task before running it, so the queue
only carries hints; the stage rows in the main database are the truth. That is also why a
damaged queue file (a garbage header, a truncated file) is simply moved aside and replaced by
a fresh one, when a process opens the queue or when an operation on it reports the damage:
nothing in it is needed, and the reconciler re-queues every pending stage once it finds the
queue empty. Fronts and workers may find the damage at the same moment, so the check and the
move happen under an OS lock on data_dir/queue.lock, and a process whose file was replaced
under it follows the path to the fresh one before its next operation.

On Redis the queue's keys are huey.*.<queue.name>; a Redis that loses them (restarted without
persistence, flushed) loses only hints too: the reconciler finds the queue empty and re-queues
every pending stage.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import sqlite3
import time
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from shared.config import QueueConfig, StorageConfig, secret
from shared.errors import StorageError
from shared.platform import exclusive_file_lock, private_folder
from shared.sqlite_errors import DAMAGED, primary_code

log = logging.getLogger("aokun.queue")

QUEUE_NAME = "aokun"


def open_queue(storage: StorageConfig, queue: QueueConfig | None = None):
    """The configured queue: a RedisHuey (queue.backend redis), else a SqliteHuey on
    data_dir/queue.db, a damaged file there moved aside first."""
    if queue is not None and queue.backend == "redis":
        return open_redis_queue(queue)
    from huey import SqliteHuey

    try:
        private_folder(storage.data_dir)
    except OSError as exc:
        raise StorageError(f"cannot create data_dir {storage.data_dir}: {exc.strerror}; create it "
                           "writable for this user or set storage.data_dir to a writable folder",
                           kind="read_only") from exc
    queue_file = QueueFile(storage)
    queue_file.replace_if_damaged()
    # results=False: nothing reads task results, and stored ones would pile up forever.
    huey = SqliteHuey(name=QUEUE_NAME, results=False, storage_class=_storage_class(),
                      queue_file=queue_file, filename=str(queue_file.path),
                      timeout=queue_file.timeout_s)
    # What shared/tasks.py turns into one-line StorageErrors, and how it names the queue.
    # Our own marks on Huey's object (read with getattr in shared/tasks.py); Huey declares no such attributes.
    huey.aokun_errors = (sqlite3.Error,)  # pyright: ignore[reportAttributeAccessIssue]
    huey.aokun_where = str(queue_file.path)  # pyright: ignore[reportAttributeAccessIssue]
    return huey


def secret_env_names(queue: QueueConfig) -> list[str]:
    """The environment variables the queue reads a secret from: queue.password_env on Redis
    when the URL holds no password."""
    if queue.backend == "redis" and queue.password_env and not urlsplit(queue.url).password:
        return [queue.password_env]
    return []


def describe_queue(storage: StorageConfig, queue: QueueConfig) -> str:
    """Which queue engine this config uses and where, for logs and `aokun doctor` (a password
    in the URL is shown as ***)."""
    if queue.backend == "redis":
        return f"redis {redact_url(queue.url)} (queue name {queue.name})"
    return f"sqlite {storage.queue_path}"


def redact_url(url: str) -> str:
    """The URL with its password replaced by ***."""
    try:
        parts = urlsplit(url)
        password = parts.password
    except ValueError:
        return "(unparsable queue.url)"
    if not password:
        return url
    userinfo = f"{parts.username or ''}:***"
    host = parts.netloc.rsplit("@", 1)[1]
    return urlunsplit((parts.scheme, f"{userinfo}@{host}", parts.path, parts.query, parts.fragment))


def _redis_client(queue: QueueConfig, env=None):
    """A Redis client on queue.url; the password from queue.password_env when the URL has none."""
    # Lazy imports: redis only when queue.backend is redis (the default SQLite queue, every
    # front and command, never needs it).
    import redis

    kwargs = {}
    password = secret("", queue.password_env, env)
    if password:
        kwargs["password"] = password  # a password in the URL takes precedence
    # A dead server fails an operation within seconds; the consumer's blocking reads wait 1 s.
    pool = redis.ConnectionPool.from_url(queue.url, socket_connect_timeout=5, socket_timeout=15,
                                         health_check_interval=30, **kwargs)
    return redis.Redis(connection_pool=pool)


def redis_problem(queue: QueueConfig) -> str | None:
    """Why the Redis at queue.url cannot be used (a failed PING), or None."""
    # Lazy imports: redis only when queue.backend is redis.
    import redis

    client = None
    try:
        client = _redis_client(queue)
        client.ping()
    except (redis.RedisError, ValueError, OSError) as exc:
        return (f"queue Redis at {redact_url(queue.url)} is unreachable ({_one_line(exc)}); start "
                "it, or fix queue.url (and the password in it or in $" + queue.password_env + ")")
    finally:
        if client is not None:
            client.close()
    return None


def require_reachable(queue: QueueConfig) -> None:
    """StorageError (one line naming the URL) when queue.backend is redis and the server does
    not answer a PING: a worker checks at start, as it has nothing to do without its queue. A
    front does not: its writes go on while Redis is away (the stage rows keep the work)."""
    if queue.backend == "redis":
        problem = redis_problem(queue)
        if problem:
            raise StorageError(problem, kind="cannot_open")


def open_redis_queue(queue: QueueConfig):
    """A RedisHuey named queue.name on queue.url. Connects on first use: a server that does not
    answer then is a one-line StorageError from shared/tasks.py naming the URL."""
    # Lazy imports: redis and Huey's Redis storage only when queue.backend is redis.
    import redis
    from huey import RedisHuey

    client = _redis_client(queue)
    # results=False as on SQLite: nothing reads task results.
    huey = RedisHuey(name=queue.name, results=False, connection_pool=client.connection_pool,
                     storage_class=_redis_storage_class(), where=redact_url(queue.url))
    # Our own marks on Huey's object (read with getattr in shared/tasks.py); Huey declares no such attributes.
    huey.aokun_errors = (redis.RedisError,)  # pyright: ignore[reportAttributeAccessIssue]
    huey.aokun_where = f"the queue Redis at {redact_url(queue.url)}"  # pyright: ignore[reportAttributeAccessIssue]
    return huey


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


def queue_file_problem(storage: StorageConfig) -> str | None:
    """What is wrong with the queue file, for `aokun doctor`, or None. Moves nothing."""
    queue_file = QueueFile(storage)
    reason = queue_file.damage()
    if reason is None:
        return None
    return (f"queue file {queue_file.path} is damaged ({reason}); `aokun repair --apply` or the "
            "next start of aokun-server or aokun-worker moves it aside and starts a fresh one "
            "(pending work is re-queued from the stage rows)")


def is_damage(exc: BaseException) -> bool:
    """Whether a SQLite error (or one it arose from) says the file itself is damaged."""
    seen = exc
    while seen is not None:
        if isinstance(seen, sqlite3.Error):
            if primary_code(seen) in DAMAGED:
                return True
        seen = seen.__cause__ or seen.__context__
    return False


def _identity(path: Path) -> tuple[int, int] | None:
    """Which file is at `path` now (device, inode), or None if there is none."""
    try:
        stat = os.stat(path)
    except OSError:
        return None
    return stat.st_dev, stat.st_ino


class QueueFile:
    """data_dir/queue.db as a file: its lock, its health check, moving it aside."""

    def __init__(self, storage: StorageConfig):
        self.path = storage.queue_path
        self.timeout_s = storage.busy_timeout_ms / 1000
        self._lock_path = storage.data_dir / "queue.lock"

    def lock(self):
        # Windows has no flock: there two processes finding the damage at once may both move
        # a file aside (the second one a fresh file); the reconciler re-queues what that loses.
        return exclusive_file_lock(self._lock_path)

    def damage(self) -> str | None:
        """Why the file is damaged, or None (also when it is missing or cannot be opened)."""
        if not self.path.is_file():
            return None
        # Read-write but never creating: a read-only connection to a WAL file leaves empty
        # -wal and -shm files behind, a read-write one cleans up after itself.
        try:
            conn = sqlite3.connect(f"{self.path.absolute().as_uri()}?mode=rw", uri=True,
                                   timeout=self.timeout_s)
        except sqlite3.Error:
            return None
        try:
            rows = conn.execute("PRAGMA quick_check").fetchall()
        except sqlite3.DatabaseError as exc:
            return str(exc) if is_damage(exc) else None
        finally:
            conn.close()
        if rows != [("ok",)]:
            return "; ".join(str(row[0]) for row in rows[:3])
        return None

    def replace_if_damaged(self) -> None:
        """At open: if the file is damaged, move it aside and start a fresh queue."""
        with self.lock():
            reason = self.damage()
            if reason is not None:
                self._replace(reason)

    def recover(self, seen: tuple[int, int] | None, reason: str) -> str:
        """After an operation found the file damaged: replace it unless another process
        already has (the file at the path is no longer the one `seen`). One warning line."""
        with self.lock():
            if seen is not None and _identity(self.path) == seen:
                return self._replace(reason)
        message = (f"queue file {self.path} was damaged ({reason}); another process has already "
                   "moved it aside and started a fresh queue; pending work is re-queued from the "
                   "stage rows")
        log.warning(message)
        return message

    def _replace(self, reason: str) -> str:
        """Move the file (and its -wal, -shm) aside and create a fresh queue; call locked."""
        target = self._aside_name()
        try:
            # The -wal first: a fresh file must never meet the damaged file's log.
            for suffix in ("-wal", "-shm", ""):
                source = Path(f"{self.path}{suffix}")
                if source.exists():
                    os.replace(source, Path(f"{target}{suffix}"))
            _create_tables(self.path, self.timeout_s)
        except (OSError, sqlite3.Error) as exc:
            raise StorageError(f"queue file {self.path} is damaged ({reason}) and could not be "
                               f"replaced ({exc}); stop every aokun process on this data_dir and "
                               "delete it (nothing in it is needed)", kind="io") from exc
        message = (f"queue file {self.path} was damaged ({reason}); moved aside to {target}; a "
                   "fresh queue is started and pending work is re-queued from the stage rows")
        log.warning(message)
        return message

    def _aside_name(self) -> Path:
        now = time.time()
        stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime(now)) + f"-{int(now * 1000) % 1000:03d}"
        target = self.path.with_name(f"{self.path.name}.damaged-{stamp}")
        counter = 1
        while any(Path(f"{target}{s}").exists() for s in ("", "-wal", "-shm")):
            counter += 1
            target = self.path.with_name(f"{self.path.name}.damaged-{stamp}-{counter}")
        return target


def _create_tables(path: Path, timeout_s: float) -> None:
    """Huey's tables in the file at `path` (created if missing)."""
    from huey.storage import SqliteStorage

    # Huey leaves timeout unannotated (its default 5 reads as an int); sqlite3 takes seconds as a float.
    SqliteStorage(QUEUE_NAME, filename=str(path), timeout=timeout_s).close()  # pyright: ignore[reportArgumentType]


@functools.cache
def _storage_class():
    """Huey's SQLite storage that survives its file being damaged or replaced. Built on first
    use so that importing this module does not import Huey."""
    from huey.storage import SqliteStorage

    class QueueStorage(SqliteStorage):
        def __init__(self, name, queue_file: QueueFile, **kwargs):
            self.queue_file = queue_file
            self._identity: tuple[int, int] | None = None
            super().__init__(name, **kwargs)

        @property
        def conn(self):
            # Another process may have moved a damaged file aside (or `aokun restore` removed
            # it): follow the path instead of writing hints nobody reads. SQLite does not
            # checkpoint into, or delete the -wal of, a file that was moved, so closing is safe.
            if self._conn is not None and _identity(self.queue_file.path) != self._identity:
                self._close_connection()
            return super().conn

        def _create_connection(self):
            # Locked: a process replacing the file creates the fresh one's tables first.
            with self.queue_file.lock():
                self._identity = _identity(self.queue_file.path)
                conn = super()._create_connection()
                if self._identity is None:  # the file was gone (deleted): this made a new one
                    self._identity = _identity(self.queue_file.path)
                    _create_tables(self.queue_file.path, self._timeout)
            return conn

        def _close_connection(self) -> None:
            conn, self._conn = self._conn, None
            if conn is not None:
                with contextlib.suppress(sqlite3.Error):
                    conn.close()

        @contextlib.contextmanager
        def db(self, commit=False, close=False):
            try:
                with super().db(commit=commit, close=close) as cursor:
                    yield cursor
            except sqlite3.DatabaseError as exc:
                if not is_damage(exc):
                    raise
                seen = self._identity
                with self.lock:
                    self._close_connection()
                raise StorageError(self.queue_file.recover(seen, str(exc)), kind="corrupt") from exc

        # The consumer polls these in a loop; a replaced file was logged once by recover() and
        # the next poll reads the fresh one, so answer "nothing" instead of a traceback. (A file
        # that could not be replaced is kind "io" and reaches Huey's own error log.)
        def dequeue(self):
            try:
                return super().dequeue()
            except StorageError as exc:
                if exc.kind != "corrupt":
                    raise
                return None

        def read_schedule(self, ts):
            try:
                return super().read_schedule(ts)
            except StorageError as exc:
                if exc.kind != "corrupt":
                    raise
                return []

    return QueueStorage


# Moves the due scheduled messages (retries) into the queue in one step on the server. Huey's
# scheduler pops them from the schedule and then enqueues them: a Redis that goes away between
# the two would lose them (the reconciler brings them back) and raise a traceback per message.
MOVE_DUE_LUA = """\
local due = redis.call('zrangebyscore', KEYS[1], '-inf', ARGV[1])
if #due > 0 then
    redis.call('zremrangebyscore', KEYS[1], '-inf', ARGV[1])
    for i = 1, #due do
        redis.call('lpush', KEYS[2], due[i])
    end
end
return #due"""


@functools.cache
def _redis_storage_class():
    """Huey's Redis storage whose polls survive the server going away or failing: one warning
    line a minute per cause instead of a traceback per poll and thread, and one line when it
    answers again; work resumes then (and the reconciler re-queues what a restarted, empty
    server lost). Built on first use, like redis."""
    # Lazy imports: redis and Huey's Redis storage only when queue.backend is redis.
    import redis
    from huey.storage import RedisStorage

    from shared.logs import RateLimitedWarnings

    class RedisQueueStorage(RedisStorage):
        def __init__(self, name, where: str = "", **kwargs):
            self.where = where
            self._warnings = RateLimitedWarnings(log)
            super().__init__(name, **kwargs)
            self._move_due = self.conn.register_script(MOVE_DUE_LUA)

        def _failed(self, exc: Exception) -> None:
            detail = _one_line(exc)
            if isinstance(exc, (redis.ConnectionError, redis.TimeoutError)):
                problem = "is unreachable"
            else:
                problem = "refused a queue command"
            self._warnings.warning(f"{type(exc).__name__}: {detail}", "queue Redis at %s %s (%s); retrying;"
                                   " the stage rows keep the work", self.where, problem, detail)
            time.sleep(1)  # each worker thread polls again after a pause, not in a hot loop

        def _answered(self) -> None:
            if self._warnings.clear():
                log.info("queue Redis at %s answers again", self.where)

        def _answering(self, call, *args, otherwise=None):
            try:
                result = call(*args)
            except redis.RedisError as exc:
                self._failed(exc)
                return otherwise
            self._answered()
            return result

        # What Huey's consumer asks of the server around a message it took (is it revoked,
        # back to the schedule if taken early, the revocation flag cleared after it ran): a
        # server gone by then is the same one line, and the message is a hint the reconciler
        # brings back. Aokun never revokes, so "none" is the answer when the server cannot say.
        def peek_many(self, keys):
            return self._answering(super().peek_many, keys, otherwise={})

        def add_to_schedule(self, data, ts):
            self._answering(super().add_to_schedule, data, ts)

        def delete_data(self, key):
            return self._answering(super().delete_data, key, otherwise=False)

        def dequeue(self):
            # Not Huey's own dequeue: it takes a timeout for an empty queue, so a server that
            # does not answer would pass for one that has no work.
            reply = self._answering(self.conn.brpop, self.queue_key, self.read_timeout)
            return reply[1] if reply else None

        def read_schedule(self, ts):
            """Move what is due into the queue on the server; Huey's scheduler gets nothing to
            enqueue itself (see MOVE_DUE_LUA)."""
            self._answering(lambda: self._move_due(keys=[self.schedule_key, self.queue_key],
                                                   args=[self.convert_ts(ts)]))
            return []

    return RedisQueueStorage
