"""The proxy's speed paths, each behind the correctness path it shortens.

A path here may only skip work whose result it can prove equal (a spot-check, a verbatim
match, a memo keyed by the exact bytes); the full path in :mod:`lego_rl.proxy` is the
reference and is taken whenever the proof does not hold. ``tokenizer_cache`` caches the ids
of repeated texts, ``tiktoken_twin`` encodes through a tiktoken copy of a BPE tokenizer,
``incremental_render`` renders only a conversation's new tail, ``parse_memo`` keeps parsed
messages a harness re-sends, ``body_texts`` reads a request body's texts without parsing the
whole, and ``shared_tools`` keeps one rendering of a tool list many sessions share.
"""
