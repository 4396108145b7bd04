"""A small JSON instance of a JSON Schema, for the A2A tests: the answer a
person would type into a form, or a remote agent would write (objects,
arrays, strings, numbers, enums, `allOf`/`anyOf`/`oneOf`, a schema's own
example first)."""


def instance_of(schema):
    """A small JSON instance of `schema` (its own example when it has one)."""
    if "allOf" in schema:
        merged = {key: value for key, value in schema.items() if key != "allOf"}
        for part in schema["allOf"]:
            merged.update(part)
        return instance_of(merged)
    if "anyOf" in schema or "oneOf" in schema:
        return instance_of((schema.get("anyOf") or schema.get("oneOf"))[0])
    if schema.get("examples"):
        return schema["examples"][0]
    if "enum" in schema:
        return schema["enum"][0]
    if "const" in schema:
        return schema["const"]
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next(k for k in kind if k != "null")
    if kind == "object" or "properties" in schema:
        properties = schema.get("properties", {})
        return {name: instance_of(properties.get(name, {"type": "string"}))
                for name in schema.get("required", list(properties))}
    if kind == "array":
        return [instance_of(schema.get("items", {"type": "string"}))
                for _ in range(max(1, schema.get("minItems", 1)))]
    if kind == "integer":
        return max(1, schema.get("minimum", 1))
    if kind == "number":
        return max(1.0, schema.get("minimum", 1.0))
    if kind == "boolean":
        return True
    text = "an answer written for the test"
    return text[: schema["maxLength"]] if "maxLength" in schema else text
