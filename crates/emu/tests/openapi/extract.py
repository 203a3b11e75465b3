#!/usr/bin/env python3
"""Extract the parts of the official API descriptions that the emulator fidelity tests need.

Reads the official OpenAPI documents (default: /work/shared/apis, override with --apis DIR)
and writes, next to this script:

  hetzner-cloud.json  from hetzner-cloud.openapi.json (OpenAPI 3.1, JSON Schema 2020-12)
  vultr-v2.json       from vultr-v2.openapi.json      (OpenAPI 3.0, translated to 2020-12)

Each output keeps, for the operations the emulators serve (OPERATIONS below), only the
response schemas by status code, plus the `components/schemas` those schemas reference
(transitively). Prose and examples (`description`, `example`, `examples`, `title`, `x-*`)
are dropped to keep the files small; nothing that constrains a value is changed, except
the mechanical OpenAPI 3.0 -> JSON Schema 2020-12 translation for the Vultr document:

  * `nullable: true`             -> the type becomes a union with "null" (and enum gains null)
  * boolean `exclusiveMinimum`/`exclusiveMaximum` -> the numeric 2020-12 form
  * keywords beside a `$ref`     -> dropped (3.0 ignores them; 2020-12 would apply them)

Deliberate departures from the published descriptions (stale fields, missing error
schemas) are NOT applied here: they live in overrides.json and are applied by the test
harness at load time, so these files stay a faithful copy of the official documents.

Usage:  python3 crates/emu/tests/openapi/extract.py [--apis /work/shared/apis]
The output is deterministic (sorted keys, 1-space indent), so a regeneration that changes
nothing leaves git clean.
"""

import argparse
import hashlib
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))

METHODS = ("get", "post", "put", "patch", "delete")

# (path, methods) served by the Hetzner Cloud emulator (EMULATOR-SPEC.md section 1.7).
HETZNER_OPERATIONS = [
    ("/actions", ["get"]),
    ("/actions/{id}", ["get"]),
    ("/servers", ["get", "post"]),
    ("/servers/{id}", ["get", "put", "delete"]),
    ("/servers/actions", ["get"]),
    ("/servers/actions/{id}", ["get"]),
    ("/servers/{id}/actions", ["get"]),
    ("/servers/{id}/actions/{action_id}", ["get"]),
    ("/servers/{id}/actions/poweron", ["post"]),
    ("/servers/{id}/actions/poweroff", ["post"]),
    ("/servers/{id}/actions/shutdown", ["post"]),
    ("/servers/{id}/actions/reboot", ["post"]),
    ("/servers/{id}/actions/reset", ["post"]),
    ("/servers/{id}/actions/rebuild", ["post"]),
    ("/servers/{id}/actions/change_dns_ptr", ["post"]),
    ("/servers/{id}/actions/change_protection", ["post"]),
    ("/servers/{id}/actions/attach_to_network", ["post"]),
    ("/servers/{id}/actions/detach_from_network", ["post"]),
    ("/servers/{id}/actions/enable_rescue", ["post"]),
    ("/servers/{id}/actions/disable_rescue", ["post"]),
    ("/server_types", ["get"]),
    ("/server_types/{id}", ["get"]),
    ("/locations", ["get"]),
    ("/locations/{id}", ["get"]),
    ("/datacenters", ["get"]),
    ("/datacenters/{id}", ["get"]),
    ("/pricing", ["get"]),
    ("/images", ["get"]),
    ("/images/{id}", ["get"]),
    ("/networks", ["get", "post"]),
    ("/networks/{id}", ["get", "put", "delete"]),
    ("/networks/actions", ["get"]),
    ("/networks/{id}/actions", ["get"]),
    ("/networks/{id}/actions/add_subnet", ["post"]),
    ("/networks/{id}/actions/delete_subnet", ["post"]),
    ("/networks/{id}/actions/add_route", ["post"]),
    ("/networks/{id}/actions/delete_route", ["post"]),
    ("/networks/{id}/actions/change_ip_range", ["post"]),
    ("/networks/{id}/actions/change_protection", ["post"]),
    ("/primary_ips", ["get", "post"]),
    ("/primary_ips/{id}", ["get", "put", "delete"]),
    ("/primary_ips/actions", ["get"]),
    ("/primary_ips/{id}/actions", ["get"]),
    ("/primary_ips/{id}/actions/assign", ["post"]),
    ("/primary_ips/{id}/actions/unassign", ["post"]),
    ("/primary_ips/{id}/actions/change_dns_ptr", ["post"]),
    ("/primary_ips/{id}/actions/change_protection", ["post"]),
    ("/floating_ips", ["get", "post"]),
    ("/floating_ips/{id}", ["get", "put", "delete"]),
    ("/floating_ips/actions", ["get"]),
    ("/floating_ips/{id}/actions", ["get"]),
    ("/floating_ips/{id}/actions/assign", ["post"]),
    ("/floating_ips/{id}/actions/unassign", ["post"]),
    ("/floating_ips/{id}/actions/change_dns_ptr", ["post"]),
    ("/floating_ips/{id}/actions/change_protection", ["post"]),
    ("/ssh_keys", ["get", "post"]),
    ("/ssh_keys/{id}", ["get", "put", "delete"]),
    ("/volumes", ["get", "post"]),
    ("/volumes/{id}", ["get", "put", "delete"]),
    ("/volumes/actions", ["get"]),
    ("/volumes/{id}/actions", ["get"]),
    ("/volumes/{id}/actions/attach", ["post"]),
    ("/volumes/{id}/actions/detach", ["post"]),
    ("/volumes/{id}/actions/resize", ["post"]),
    ("/volumes/{id}/actions/change_protection", ["post"]),
]

# (path, methods) served by the Vultr emulator (EMULATOR-SPEC.md section 2.5).
VULTR_OPERATIONS = [
    ("/instances", ["get", "post"]),
    ("/instances/{instance-id}", ["get", "patch", "delete"]),
    ("/instances/halt", ["post"]),
    ("/instances/reboot", ["post"]),
    ("/instances/start", ["post"]),
    ("/instances/{instance-id}/start", ["post"]),
    ("/instances/{instance-id}/halt", ["post"]),
    ("/instances/{instance-id}/reboot", ["post"]),
    ("/instances/{instance-id}/reinstall", ["post"]),
    ("/instances/{instance-id}/user-data", ["get"]),
    ("/instances/{instance-id}/ipv4", ["get"]),
    ("/instances/{instance-id}/ipv6", ["get"]),
    ("/instances/{instance-id}/ipv4/reverse", ["post"]),
    ("/instances/{instance-id}/ipv4/reverse/default", ["post"]),
    ("/instances/{instance-id}/ipv6/reverse", ["get", "post"]),
    ("/instances/{instance-id}/ipv6/reverse/{ipv6}", ["delete"]),
    ("/instances/{instance-id}/vpcs", ["get"]),
    ("/instances/{instance-id}/vpcs/attach", ["post"]),
    ("/instances/{instance-id}/vpcs/detach", ["post"]),
    ("/plans", ["get"]),
    ("/regions", ["get"]),
    ("/regions/{region-id}/availability", ["get"]),
    ("/os", ["get"]),
    ("/account", ["get"]),
    ("/reserved-ips", ["get", "post"]),
    ("/reserved-ips/{reserved-ip}", ["get", "patch", "delete"]),
    ("/reserved-ips/{reserved-ip}/attach", ["post"]),
    ("/reserved-ips/{reserved-ip}/detach", ["post"]),
    ("/reserved-ips/convert", ["post"]),
    ("/vpcs", ["get", "post"]),
    ("/vpcs/{vpc-id}", ["get", "put", "delete"]),
    ("/vpc2", ["get"]),
    ("/ssh-keys", ["get", "post"]),
    ("/ssh-keys/{ssh-key-id}", ["get", "patch", "delete"]),
    ("/blocks", ["get", "post"]),
    ("/blocks/{block-id}", ["get", "patch", "delete"]),
    ("/blocks/{block-id}/attach", ["post"]),
    ("/blocks/{block-id}/detach", ["post"]),
]

# Prose, examples and vendor extensions: no effect on validation.
DROPPED_KEYS = {"description", "example", "examples", "title", "summary"}


def is_schema_map(key):
    """Keys whose value maps user-chosen names to schemas (their keys are not keywords)."""
    return key in ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas")


def clean(node, openapi30, in_map=False):
    """Drop prose and, for OpenAPI 3.0, translate to JSON Schema 2020-12."""
    if isinstance(node, list):
        return [clean(v, openapi30) for v in node]
    if not isinstance(node, dict):
        return node
    if in_map:
        return {k: clean(v, openapi30) for k, v in node.items()}
    if openapi30 and "$ref" in node:
        return {"$ref": node["$ref"]}
    out = {}
    for key, value in node.items():
        if key in DROPPED_KEYS or key.startswith("x-"):
            continue
        if key == "enum" or key == "const" or key == "default":
            out[key] = value
            continue
        out[key] = clean(value, openapi30, in_map=is_schema_map(key))
    if openapi30:
        if out.pop("nullable", False) is True:
            t = out.get("type")
            if isinstance(t, str):
                out["type"] = [t, "null"]
            elif isinstance(t, list) and "null" not in t:
                out["type"] = t + ["null"]
            if "enum" in out and None not in out["enum"]:
                out["enum"] = out["enum"] + [None]
        for bound, limit in (("exclusiveMinimum", "minimum"), ("exclusiveMaximum", "maximum")):
            if isinstance(out.get(bound), bool):
                if out.pop(bound) and limit in out:
                    out[bound] = out.pop(limit)
    return out


def json_schema_of(response):
    content = response.get("content") or {}
    media = content.get("application/json")
    if media is None:
        return None
    return media.get("schema")


def collect_refs(node, found):
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str):
            found.add(ref)
        for v in node.values():
            collect_refs(v, found)
    elif isinstance(node, list):
        for v in node:
            collect_refs(v, found)


def resolve_pointer(doc, ref):
    if not ref.startswith("#/"):
        raise SystemExit(f"external $ref not supported: {ref}")
    node = doc
    for part in ref[2:].split("/"):
        part = part.replace("~1", "/").replace("~0", "~")
        node = node[part]
    return node


def extract(doc, operations, openapi30):
    paths = {}
    for path, methods in operations:
        item = doc["paths"].get(path)
        if item is None:
            raise SystemExit(f"path {path} is not in the description")
        out_item = {}
        for method in methods:
            op = item.get(method)
            if op is None:
                raise SystemExit(f"{method.upper()} {path} is not in the description")
            responses = {}
            for status, response in sorted(op["responses"].items()):
                if "$ref" in response:
                    response = resolve_pointer(doc, response["$ref"])
                entry = {}
                schema = json_schema_of(response)
                if schema is not None:
                    entry["schema"] = clean(schema, openapi30)
                if response.get("content") and schema is None:
                    entry["media_types"] = sorted(response["content"].keys())
                responses[status] = entry
            out_item[method] = {"operationId": op.get("operationId"), "responses": responses}
        paths[path] = out_item

    # Referenced component schemas, transitively.
    schemas = {}
    pending = set()
    collect_refs(paths, pending)
    seen = set()
    while pending:
        ref = pending.pop()
        if ref in seen:
            continue
        seen.add(ref)
        prefix = "#/components/schemas/"
        if not ref.startswith(prefix):
            raise SystemExit(f"unexpected $ref target {ref}")
        name = ref[len(prefix):]
        schema = clean(doc["components"]["schemas"][name], openapi30)
        schemas[name] = schema
        collect_refs(schema, pending)
    return {"paths": paths, "components": {"schemas": schemas}}


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        h.update(f.read())
    return h.hexdigest()


def write(name, source_path, doc, subset):
    subset = {
        "x-source": {
            "file": os.path.basename(source_path),
            "sha256": sha256(source_path),
            "openapi": doc["openapi"],
            "title": doc["info"]["title"],
            "version": doc["info"]["version"],
            "extracted_by": "crates/emu/tests/openapi/extract.py",
        },
        **subset,
    }
    out = os.path.join(HERE, name)
    with open(out, "w", encoding="utf-8") as f:
        json.dump(subset, f, indent=1, sort_keys=True, ensure_ascii=False)
        f.write("\n")
    print(f"wrote {out} ({os.path.getsize(out)} bytes)", file=sys.stderr)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--apis", default="/work/shared/apis", help="directory of the descriptions")
    args = parser.parse_args()

    hetzner_path = os.path.join(args.apis, "hetzner-cloud.openapi.json")
    with open(hetzner_path, encoding="utf-8") as f:
        hetzner = json.load(f)
    if not hetzner["openapi"].startswith("3.1"):
        raise SystemExit("the Hetzner description is expected to be OpenAPI 3.1")
    write("hetzner-cloud.json", hetzner_path, hetzner, extract(hetzner, HETZNER_OPERATIONS, False))

    vultr_path = os.path.join(args.apis, "vultr-v2.openapi.json")
    with open(vultr_path, encoding="utf-8") as f:
        vultr = json.load(f)
    if not vultr["openapi"].startswith("3.0"):
        raise SystemExit("the Vultr description is expected to be OpenAPI 3.0")
    write("vultr-v2.json", vultr_path, vultr, extract(vultr, VULTR_OPERATIONS, True))


if __name__ == "__main__":
    main()
