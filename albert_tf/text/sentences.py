"""A small rule-based sentence splitter for corpora that come one document per line.

Rules (in order):
1. Whitespace runs (including newlines) become one space.
2. A sentence may end after one or more of `.`, `!`, `?` (and any closing quotes or brackets right
   after them) when whitespace follows and the next character is an uppercase (or uncased)
   letter, a digit, an opening quote or bracket, or a backtick.
3. A period does not end a sentence after a known abbreviation (Mr., Dr., e.g., Fig., ...), after
   a single letter (initials such as "J. R. R."), or after a token with an inner period ("U.S.").
4. Pieces without any letter or digit are glued to the preceding sentence.

It is meant for prose (Wikipedia, books, docstrings), not for a linguistic benchmark.

>>> split_sentences("Dr. Smith arrived at 9 p.m. on Monday. He said: \\"Hi!\\" Then he left.")
['Dr. Smith arrived at 9 p.m. on Monday.', 'He said: "Hi!"', 'Then he left.']
"""

import re

ABBREVIATIONS = frozenset(
    """
    mr mrs ms dr prof sr jr st mt vs cf al approx fig figs eq eqs no nos vol vols pp ch sec
    dept est inc ltd co corp jan feb mar apr jun jul aug sep sept oct nov dec gen col lt sgt
    capt rev hon gov sen rep
""".split()
)

# A candidate end: terminal punctuation, closing quotes/brackets, whitespace, then a sentence start.
_BOUNDARY = re.compile(r"""[.!?]+["'\u201d\u2019)\]]*(\s+)(?=\S)""")
_OPENERS = frozenset("\"'`([\u201c\u2018")
_LAST_WORD = re.compile(r"(\S+)$")
_HAS_WORD_CHAR = re.compile(r"[^\W_]")


def _is_abbreviation(text_before_period):
    match = _LAST_WORD.search(text_before_period)
    if not match:
        return False
    word = match.group(1).lstrip("\"'(\u201c\u2018[")
    if "." in word:  # e.g, i.e, U.S, p.m
        return True
    if len(word) == 1 and word.isalpha():  # an initial
        return True
    return word.lower() in ABBREVIATIONS


def split_sentences(text):
    """Splits one paragraph or document into a list of sentence strings (see the module rules)."""
    text = " ".join(text.split())
    sentences = []
    start = 0
    for match in _BOUNDARY.finditer(text):
        end, punct_at = match.start(1), match.start()
        following = text[match.end()]
        if not (
            following.isdigit()
            or following in _OPENERS
            or (following.isalpha() and not following.islower())
        ):
            continue
        single_period = match.group(0)[0] == "." and match.group(0)[1:2] != "."
        if single_period and _is_abbreviation(text[start:punct_at]):
            continue
        sentences.append(text[start:end])
        start = match.end()
    if start < len(text):
        sentences.append(text[start:])
    merged = []
    for s in sentences:
        if merged and not _HAS_WORD_CHAR.search(s):
            merged[-1] = f"{merged[-1]} {s}"
        else:
            merged.append(s)
    return merged
