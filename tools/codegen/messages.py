from __future__ import annotations


def render_messages(messages):
    return {}
