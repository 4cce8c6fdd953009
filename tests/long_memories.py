"""Long memories for tests: filler of both languages with a fact placed late in it, and a
question that finds the fact by meaning alone (tests/test_passages.py in the test process,
tests/process/test_passages_process.py through real processes)."""

from __future__ import annotations

from helpers import db_rows

FILLER_EN = [
    "The train to the coast left at seven and the carriage smelled of coffee and wet coats.",
    "We talked about the new office layout, the broken printer and who would water the plants.",
    "In the afternoon the rain stopped and the children ran out to the playground by the school.",
    "My neighbour repaired his bicycle chain on the steps while the radio played old songs.",
    "The meeting ran long because nobody could agree on the budget for the spring campaign.",
    "At the market the stalls sold apples, honey, knitted hats and secondhand paperback novels.",
]
FILLER_ZH = [
    "早上坐地铁去公司，车厢里人很多，大家都在低头看手机。", "中午和同事在楼下吃了一碗牛肉面，聊了聊周末的计划。",
    "下午开会讨论新项目的预算，大家意见不太一致。", "晚上回家路上下起了小雨，我在便利店买了一把伞。",
    "周末去公园散步，看到很多人在放风筝和打太极。", "楼下的小卖部新进了一批水果，苹果和橙子都很新鲜。",
]
# (fact, a question sharing no rare word with it, filler, how the filler's sentences join)
DEEP = {
    "en": ("My grandmother's secret recipe for plum dumplings uses quark and cinnamon.",
           "what goes into granny's fruit dough balls?", FILLER_EN, " "),
    "zh": ("我外婆的拿手菜是桂花糯米藕，她每年秋天都会做。", "奶奶最擅长做什么菜？", FILLER_ZH, ""),
}
def long_text(filler: list[str], joiner: str, sentences: int, fact: str | None = None) -> str:
    """`sentences` of filler, with the fact four fifths of the way in."""
    parts = [filler[i % len(filler)] for i in range(sentences)]
    if fact:
        parts.insert(sentences * 4 // 5, fact)
    return joiner.join(parts)


def stored_text(config, memory_id: int) -> str:
    """The memory's text as stored (with the time marker memorize puts before it)."""
    return db_rows(config, "SELECT text FROM documents WHERE id = ?", (memory_id,))[0][0]


def passage_owners(config, memory_id: int) -> list[int]:
    return [r[0] for r in db_rows(config, "SELECT owner_id FROM vectors WHERE kind = 'passage' AND memory_id = ?"
                                  " ORDER BY owner_id", (memory_id,))]
