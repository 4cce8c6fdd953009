"""One call for both providers: the rules answer directly; the llm answers unless it fails, and
then the rules answer with a warning saying why — a misbehaving model is never an error here."""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

from shared.config import SUMMARIZER_PROVIDERS, SummarizerConfig
from shared.errors import InvalidInput, StorageError
from shared.summarize.conversation import Turn
from shared.summarize.llm import LlmSummarizer, SummarizerError, Usage
from shared.summarize.schema import StructuredMemory

if TYPE_CHECKING:
    from shared.live_config import LiveConfig
    from shared.store.interface import Store
    from shared.summarize.rules import RulesSummarizer

log = logging.getLogger(__name__)


class Summarizer:
    """Reads the summarizer settings (`live.now.summarizer`) on every call: providers and
    endpoints can change."""

    def __init__(self, store: Store, rules: RulesSummarizer, live: LiveConfig):
        self._store = store
        self._rules = rules
        self._live = live

    def settings(self) -> SummarizerConfig:
        """The summarizer.* settings the next call will use."""
        return self._live.now.summarizer

    def uses_model(self, provider: str | None = None) -> bool:
        """Whether a call with `provider` (None: summarizer.provider) would wait on the model."""
        return (provider or self.settings().provider) == "llm"

    def summarize(self, turns: list[Turn], provider: str | None = None) -> StructuredMemory:
        """The structured memory of `turns` by `provider` (None: summarizer.provider), trimmed to
        memorize's limits."""
        config = self.settings()
        provider = provider or config.provider
        if provider not in SUMMARIZER_PROVIDERS:
            raise InvalidInput(f"provider must be one of {', '.join(SUMMARIZER_PROVIDERS)}, got {provider!r}")
        if provider == "rules":
            return self._rules.summarize(turns, config).trimmed()
        return self._by_llm(turns, config).trimmed()

    def _by_llm(self, turns: list[Turn], config: SummarizerConfig) -> StructuredMemory:
        llm = LlmSummarizer(config)
        try:
            memory, failure = llm.summarize(turns), None
        except SummarizerError as exc:
            memory, failure = None, str(exc)
        warnings = self._count_usage(config, llm.usage, failed=failure is not None)
        if failure is not None:
            log.warning("llm provider failed, rules summary used: %s", failure)
            memory = self._rules.summarize(turns, config)
            warnings.insert(0, f"llm provider failed ({failure}): rules summary used")
        assert memory is not None  # the provider's, or the rules' after its failure
        return memory.model_copy(update={"warnings": [*memory.warnings, *warnings]})

    def _count_usage(self, config: SummarizerConfig, spent: Usage, failed: bool) -> list[str]:
        """Count the call against its model; a warning, not a lost summary, when the store cannot."""
        if not config.model.strip():
            return []  # nothing was sent: there is no model to count it against
        try:
            with self._store.write() as tx:
                tx.usage.record(config.model, spent.prompt_tokens, spent.completion_tokens, failed,
                                time.time())
        except StorageError as exc:
            log.warning("llm token usage not recorded: %s", exc)
            return [f"token usage not recorded: {exc}"]
        return []
