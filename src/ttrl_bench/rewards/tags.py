"""Reading <tag>...</tag> spans in model output, shared by the rewards (grounding's answer span
and thinking format) and evaluation's answer extraction (evaluation/extraction.py), which sits above
the rewards and imports it from here."""

from __future__ import annotations


def tag_spans(text: str, tag: str = "answer"):
    """Spans of what each <tag>...</tag> holds, left to right, as `re.findall(r"<tag>(.*?)</tag>",
    re.DOTALL)` would find them, in linear time: that regex retries every unclosed "<tag>", so
    a rollout repeating "<answer>" 20,000 times took 30 s (quadratic)."""
    opening, closing = f"<{tag}>", f"</{tag}>"
    start = text.find(opening)
    while start >= 0:
        end = text.find(closing, start + len(opening))
        if end < 0:
            return
        yield start + len(opening), end
        start = text.find(opening, end + len(closing))
