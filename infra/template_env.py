#!/usr/bin/env python3
"""Prints, as KEY=VALUE lines, the environment infra/template.yaml gives one
function (Globals merged with the function's own), with `!Ref` and
`!FindInMap` resolved from VALUES (parameters and resources given on the
command line, e.g. RunsTable=baton-check) and the template's Mappings, and
`!GetAtt Resource.Attribute` from VALUES too (IngestQueue.Arn=arn:...).

    python3 infra/template_env.py FUNCTION_LOGICAL_ID NAME=VALUE...
"""
import sys

import yaml


class Tagged:
    def __init__(self, tag, value):
        self.tag, self.value = tag, value


def construct(loader, suffix, node):
    if isinstance(node, yaml.ScalarNode):
        value = loader.construct_scalar(node)
    elif isinstance(node, yaml.SequenceNode):
        value = loader.construct_sequence(node, deep=True)
    else:
        value = loader.construct_mapping(node, deep=True)
    return Tagged(suffix, value)


yaml.SafeLoader.add_multi_constructor("!", construct)
function, pairs = sys.argv[1], dict(arg.split("=", 1) for arg in sys.argv[2:])
with open(sys.argv[0].rsplit("/", 1)[0] + "/template.yaml") as handle:
    template = yaml.safe_load(handle)


def resolve(value):
    if isinstance(value, Tagged):
        if value.tag == "Ref":
            if value.value in pairs:
                return pairs[value.value]
            default = template.get("Parameters", {}).get(value.value, {}).get("Default")
            if default is None:
                sys.exit(f"template_env: give a value for {value.value}")
            return str(default)
        if value.tag == "GetAtt" and value.value in pairs:
            return pairs[value.value]
        if value.tag == "FindInMap":
            name, key, field = value.value
            return str(template["Mappings"][name][key][field])
        sys.exit(f"template_env: cannot resolve !{value.tag}")
    return str(value)


variables = dict(template["Globals"]["Function"].get("Environment", {}).get("Variables", {}))
resource = template["Resources"][function]["Properties"]
variables.update(resource.get("Environment", {}).get("Variables", {}))
for name, value in variables.items():
    print(f"{name}={resolve(value)}")
