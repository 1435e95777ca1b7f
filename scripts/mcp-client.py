#!/usr/bin/env python3
"""A real MCP client's session with `oraculo mcp`, through the official Python SDK.

The SDK (PyPI `mcp`, pinned in .ci/run) starts `oraculo mcp` over stdio on the built-in sample
campaign, ingested first into a temporary data dir with the embedded e5 model, and:

- initializes, lists the tools, calls each one, lists the resources and reads one, gets the
  prompt, as the players and then as the GM (`--gm`);
- checks that the players' view holds none of the sample's four GM secrets in anything it
  returns (every tool, every label's source, every resource), and that the GM's view finds
  each one.

Usage: python3 scripts/mcp-client.py --oraculo target/debug/oraculo [--e5 FILE] [--data DIR] [--transcript FILE]
It prints one line per check and exits 1 if any fails.
"""

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

# The sample's GM secrets (`oraculo secrets` lists four passages): words only each one holds.
SECRETS = {
    "responde en secreto ante la Magistra": "Verónica de Valdemora's sheet, a gm comment",
    "hermanastro bastardo": "Tobías Lerma's sheet, a secret callout",
    "cáscara de sal": "session 30, a DM's note callout",
    "el precio fue su hermano": "the chronicle, a %% comment",
}
SECRET_NAMES = ["Umbravela", "Ramiro"]
TOOLS = {"search", "ask", "timeline", "recap", "source", "sessions", "compendium"}
QUESTION = "¿Qué pasó con el archiduque?"

failures = []


def check(ok, what):
    print(f"{'PASS' if ok else 'FAIL'}  {what}", flush=True)
    if not ok:
        failures.append(what)


def default_e5():
    data = os.environ.get("ORACULO_DATA")
    if not data:
        xdg = os.environ.get("XDG_DATA_HOME")
        data = os.path.join(xdg, "oraculo") if xdg else os.path.expanduser("~/.local/share/oraculo")
    return os.path.join(data, "models", "e5-small-q4.bin")


def environment(e5, data):
    """What the server reads: the e5 model and the data dir, nothing else of the caller's."""
    return {"ORACULO_E5_MODEL": e5, "ORACULO_DATA": data}


def dump(value):
    """What a client reads of an SDK object, as text."""
    if hasattr(value, "model_dump"):
        return json.dumps(value.model_dump(mode="json", by_alias=True), ensure_ascii=False)
    return json.dumps(value, ensure_ascii=False, default=str)


def text_of(result):
    return "".join(getattr(block, "text", "") for block in result.content)


async def session(oraculo, e5, data, gm, transcript):
    """One session as the players (or the GM): everything the server lets a client read."""
    view = "GM" if gm else "players"
    args = ["mcp"] + (["--gm"] if gm else [])
    params = StdioServerParameters(command=oraculo, args=args, env=environment(e5, data))
    seen = []
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as client:
            init = await client.initialize()
            seen.append(dump(init))
            check(init.server_info.name == "oraculo", f"{view}: initialize names the server ({init.server_info.name})")

            tools = (await client.list_tools()).tools
            seen.append(dump(tools))
            names = {tool.name for tool in tools}
            check(names == TOOLS, f"{view}: the seven tools are listed ({sorted(names)})")
            marker = "GM's view" if gm else "players' view"
            check(all(marker in (tool.description or "") for tool in tools), f"{view}: every description says «{marker}»")

            async def call(tool, arguments):
                result = await client.call_tool(tool, arguments)
                seen.append(dump(result))
                check(not result.is_error and result.structured_content is not None,
                      f"{view}: {tool} {json.dumps(arguments, ensure_ascii=False)} answers, with structured content")
                return result

            listed = (await call("sessions", {})).structured_content
            labels = [s["label"] for s in listed["sessions"]] + [s["label"] for s in listed["other_sources"]]
            check(len(listed["sessions"]) == 40, f"{view}: sessions lists the sample's 40 sessions")
            search = await call("search", {"question": QUESTION})
            check(search.structured_content["fragments"] and "[Sesión" in text_of(search),
                  f"{view}: search finds cited fragments for {QUESTION}")
            ask = await call("ask", {"question": QUESTION})
            check("[Sesión" in text_of(ask), f"{view}: ask's answer cites its notes")
            await call("timeline", {"name": "Leandro"})
            await call("recap", {})
            await call("recap", {"session": "la penúltima"})
            await call("compendium", {})
            for label in labels:
                await call("source", {"label": label})
            for question in ["¿Quién es el verdadero padre de Tobías?", "¿Qué es el Heraldo de la Marea Baja?",
                             "¿Qué pacto hizo Verónica y cuál fue el precio?"]:
                await call("search", {"question": question})
                await call("ask", {"question": question})

            empty = await client.call_tool("search", {"question": " "})
            check(empty.is_error and "empty" in text_of(empty), f"{view}: an empty question is a tool error")
            unknown = await client.call_tool("source", {"label": "Sesión 99"})
            check(unknown.is_error and "`sessions`" in text_of(unknown),
                  f"{view}: an unknown label is a tool error that says what to call")

            resources = (await client.list_resources()).resources
            seen.append(dump(resources))
            check({r.name for r in resources} == set(labels), f"{view}: each of the {len(labels)} labels is a resource")
            for resource in resources:
                read = await client.read_resource(resource.uri)
                seen.append(dump(read))
            first = await client.read_resource(resources[0].uri)
            check(first.contents and first.contents[0].text.startswith(f"[{resources[0].name}]"),
                  f"{view}: reading {resources[0].uri} gives the label's text")

            prompt = await client.get_prompt("cite_the_notes", {"question": QUESTION})
            seen.append(dump(prompt))
            check("corchetes" in prompt.messages[0].content.text, f"{view}: the prompt states the citation rule")

            if transcript is not None and not gm:
                transcript.write(f"## search {QUESTION}\n\n{text_of(search)}\n\n## ask {QUESTION}\n\n{text_of(ask)}\n")
    return "\n".join(seen)


async def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--oraculo", required=True, help="the oraculo binary")
    parser.add_argument("--e5", default=default_e5(), help="the embedded e5 model file")
    parser.add_argument("--transcript", help="write the players' search and ask answers here")
    parser.add_argument("--data", help="a data dir to ingest into and keep (default: a temporary one)")
    args = parser.parse_args()
    oraculo = str(Path(args.oraculo).resolve())
    if not os.path.isfile(args.e5):
        sys.exit(f"no e5 model at {args.e5}: run scripts/fetch-models.sh")

    with tempfile.TemporaryDirectory(prefix="oraculo-mcp-") as scratch:
        data = args.data or scratch
        ingest = subprocess.run([oraculo, "ingest", "--no-annotate"], env=os.environ | environment(args.e5, data),
                                capture_output=True, text=True)
        check(ingest.returncode == 0, f"the sample is ingested into {data}")
        if ingest.returncode != 0:
            sys.exit(ingest.stderr)
        transcript = open(args.transcript, "w", encoding="utf-8") if args.transcript else None
        try:
            players = await session(oraculo, args.e5, data, gm=False, transcript=transcript)
            gm = await session(oraculo, args.e5, data, gm=True, transcript=None)
        finally:
            if transcript is not None:
                transcript.close()
        for words, where in SECRETS.items():
            check(words not in players, f"players: nothing returned holds {where} («{words}»)")
            check(words in gm, f"GM: the GM's view finds {where}")
        for name in SECRET_NAMES:
            check(name not in players, f"players: nothing returned names «{name}»")

    print(f"mcp-client: {len(failures)} check(s) failed" if failures else "mcp-client: every check passed")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    asyncio.run(main())
