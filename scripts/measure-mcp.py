#!/usr/bin/env python3
"""Latency of `oraculo mcp`'s `search` tool beside `oraculo search`'s, over a question bank.

One MCP session (the official Python SDK over stdio), warmed by one call, then one `search`
call per question, timed at the client (the whole round trip); then `oraculo search --json`
once per question, timed as a process (what a DM waits for at a terminal: the embedder
loaded and the index opened each time) and by the search's own stage timings. Prints p50
and p95 of each, in milliseconds. Name the machine and the build beside the figures.

Usage: python3 scripts/measure-mcp.py --oraculo target/release/oraculo --data DIR [--e5 FILE]
       [--questions eval/questions.jsonl]
The data dir must hold the sample's index (`oraculo ingest --no-annotate --data DIR`).
"""

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import time

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client


def percentile(values, share):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(share * (len(ordered) - 1)))]


def report(name, values):
    print(f"{name:<40} n={len(values):<3} p50 {percentile(values, 0.5):8.1f} ms   p95 {percentile(values, 0.95):8.1f} ms"
          f"   mean {statistics.mean(values):8.1f} ms")


async def mcp_calls(oraculo, env, questions):
    params = StdioServerParameters(command=oraculo, args=["mcp"], env=env)
    times = []
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as client:
            await client.initialize()
            await client.call_tool("search", {"question": questions[0]})  # warm: the compendium matcher, the index
            for question in questions:
                started = time.perf_counter()
                result = await client.call_tool("search", {"question": question})
                times.append((time.perf_counter() - started) * 1000)
                assert not result.is_error, result
    return times


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--oraculo", required=True)
    parser.add_argument("--data", required=True)
    parser.add_argument("--e5", default=os.path.expanduser("~/.local/share/oraculo/models/e5-small-q4.bin"))
    parser.add_argument("--questions", default=os.path.join(os.path.dirname(__file__), "..", "eval", "questions.jsonl"))
    args = parser.parse_args()
    oraculo = os.path.abspath(args.oraculo)
    with open(args.questions, encoding="utf-8") as bank:
        questions = [json.loads(line)["question"] for line in bank if line.strip()]
    env = {"ORACULO_E5_MODEL": args.e5, "ORACULO_DATA": args.data}

    mcp = asyncio.run(mcp_calls(oraculo, env, questions))
    process, stages = [], []
    for question in questions:
        started = time.perf_counter()
        output = subprocess.run([oraculo, "search", "--json", question], env=os.environ | env,
                                capture_output=True, text=True, check=True)
        process.append((time.perf_counter() - started) * 1000)
        timings = json.loads(output.stdout)["timings"]
        stages.append(sum(timings.values()))

    report("mcp search tool call (warm server)", mcp)
    report("oraculo search --json (process)", process)
    report("oraculo search (sum of its stage timings)", stages)


if __name__ == "__main__":
    main()
