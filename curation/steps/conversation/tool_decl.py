"""Tool declarations: read from OpenAI layouts (`read_tools`) and rendered for the developer message as
TypeScript-style types (`declare_tools`; Apertus 1.0/1.5 section 4.1).

One tool, from its JSON schema, becomes

    // Get the weather for a city
    type get_weather = (_: {
    // City name
    city: string,
    unit?: "c" | "f" // default: "c"
    }) => any;

(optional parameters take `?`; a description becomes a `//` line above its item; tools are separated by
a newline). Schema types map as string/number/integer/boolean/null, `enum` to a union of literals,
`anyOf`/`oneOf` and type lists to unions, arrays to `T[]`, objects with properties to `{a: T, b?: T}`,
anything else to `any`.
"""
from __future__ import annotations

import json

from curation.errors import RecordError

_SCALARS = {"string": "string", "number": "number", "integer": "number", "boolean": "boolean", "null": "null",
            "object": "object", "array": "any[]"}


def ts_type(spec) -> str:
    if not isinstance(spec, dict):
        return "any"
    if "enum" in spec and isinstance(spec["enum"], list) and spec["enum"]:
        out = " | ".join(json.dumps(v, ensure_ascii=False) for v in spec["enum"])
    elif isinstance(spec.get("anyOf") or spec.get("oneOf"), list):
        out = " | ".join(dict.fromkeys(ts_type(s) for s in spec.get("anyOf") or spec.get("oneOf")))
    elif isinstance(spec.get("type"), list):
        out = " | ".join(dict.fromkeys(ts_type({**spec, "type": t}) for t in spec["type"]))
    elif spec.get("type") == "array" and isinstance(spec.get("items"), dict):
        inner = ts_type(spec["items"])
        out = f"({inner})[]" if " | " in inner else f"{inner}[]"
    elif spec.get("type") == "object" and isinstance(spec.get("properties"), dict) and spec["properties"]:
        required = set(spec.get("required") or [])
        out = "{" + ", ".join(f"{k}{'' if k in required else '?'}: {ts_type(v)}"
                              for k, v in spec["properties"].items()) + "}"
    else:
        out = _SCALARS.get(spec.get("type"), "any")
    return f"{out} | null" if spec.get("nullable") and not out.endswith("null") else out


def _comment(text: str) -> list[str]:
    return [f"// {line}".rstrip() for line in text.strip().splitlines()] if text and text.strip() else []


def declare_tools(tools: list[dict]) -> str:
    """`tools`: `{"name", "description", "parameters"}` (as `curation.steps.conversation.turns` normalises them)."""
    lines: list[str] = []
    for tool in tools:
        lines += _comment(tool.get("description", ""))
        params = tool.get("parameters") or {}
        props = params.get("properties") if isinstance(params.get("properties"), dict) else {}
        props = {k: v for k, v in props.items() if v is not None}   # Parquet structs fill absent keys with null
        if not props:
            lines.append(f"type {tool['name']} = () => any;")
            continue
        lines.append(f"type {tool['name']} = (_: {{")
        required = set(params.get("required") or [])
        for i, (name, spec) in enumerate(props.items()):
            lines += _comment(spec.get("description", "") if isinstance(spec, dict) else "")
            line = f"{name}{'' if name in required else '?'}: {ts_type(spec)}{',' if i < len(props) - 1 else ''}"
            if isinstance(spec, dict) and "default" in spec:
                line += f" // default: {json.dumps(spec['default'], ensure_ascii=False)}"
            lines.append(line)
        lines.append("}) => any;")
    return "\n".join(lines)


def read_tools(raw) -> list[dict]:
    """OpenAI tool declarations (`{"type": "function", "function": {...}}` or the bare function objects)
    as `{"name", "description", "parameters"}`."""
    if raw is None or raw == "" or raw == []:
        return []
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except json.JSONDecodeError as e:
            raise RecordError("bad_tools", f"the tools field is not JSON ({e.msg} at column {e.colno})") from None
    if not isinstance(raw, list):
        raise RecordError("bad_tools", f"the tools field holds a {type(raw).__name__}, not a list")
    tools = []
    for t in raw:
        fn = t.get("function", t) if isinstance(t, dict) else None
        if not isinstance(fn, dict) or not isinstance(fn.get("name"), str) or not fn["name"]:
            raise RecordError("bad_tools", f"tool declaration {t!r:.80} has no name")
        params = fn.get("parameters") or {}
        if not isinstance(params, dict):
            raise RecordError("bad_tools", f"tool {fn['name']!r}: parameters must be a JSON schema object")
        tools.append({"name": fn["name"], "description": str(fn.get("description") or ""), "parameters": params})
    return tools
