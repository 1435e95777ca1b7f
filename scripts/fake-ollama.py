#!/usr/bin/env python3
"""A stand-in for Ollama on 127.0.0.1, for scripts/faults.sh: embeddings, and a chat model
that repeats its prompt.

Speaks the wire format Oráculo's Ollama clients use (src/llm/embed/ollama.rs,
src/llm/chat/ollama.rs):
- GET /api/tags: the embedder `bge-m3` and the chat model `eco` (any other name is served too).
- POST /api/embed ({"model", "input": [...]} -> {"model", "embeddings": [[...]]}). Vectors are
  bags of hashed words (64 floats, normalised), so the same text always gets the same vector
  and texts sharing words are near.
- POST /api/show: `model_info["eco.context_length"]` = 32768.
- POST /api/chat ({"model", "messages": [{"role", "content"}], "stream", "format", "options"}):
  the reply repeats the whole prompt, every message's content in order, streamed as NDJSON
  lines ({"model", "message": {"role": "assistant", "content"}, "done": false}, then one
  {"done": true, "done_reason": "stop", "prompt_eval_count", "eval_count"}), or as one JSON
  object when "stream" is false. With a `format` JSON schema, the reply is an instance of the
  schema whose string fields hold the prompt's text, last message first (an answer's notes are
  in the last message, and string fields have a maximum length), cut into pieces that fit.
  A model that obeys every instruction it reads: what a prompt injection in a note would
  make a real model do at worst. Each chat request is appended to chat.jsonl beside the
  port file (one {"messages", "format", "reply"} line), so a test can see what reached the model.

Writes the port it listens on to the file named by its first argument. While a file named
SLOW exists beside that file, each embed request waits its content in seconds (a slow model,
so a kill lands mid-ingest).
"""

import hashlib
import json
import math
import os
import re
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

DIMENSION = 64
# Characters per streamed line of a chat reply.
CHUNK = 40


def embedding(text):
    vector = [0.0] * DIMENSION
    for word in re.findall(r"\w+", text.lower()):
        digest = hashlib.sha256(word.encode()).digest()
        vector[digest[0] % DIMENSION] += 1.0 if digest[1] % 2 else -1.0
    norm = math.sqrt(sum(x * x for x in vector)) or 1.0
    return [x / norm for x in vector]


def instance(schema, text):
    """A JSON value valid for `schema` (the subset Oráculo's schemas use: anyOf, const, enum,
    object, array, string, integer, number, boolean), its strings taken from the front of
    `text` (a one-item list, consumed as pieces are used)."""
    if "anyOf" in schema:
        return instance(schema["anyOf"][0], text)
    if "const" in schema:
        return schema["const"]
    if "enum" in schema:
        return schema["enum"][0]
    kind = schema.get("type", "object")
    if isinstance(kind, list):
        kind = kind[0]
    if kind == "object":
        return {name: instance(sub, text) for name, sub in schema.get("properties", {}).items()}
    if kind == "array":
        items = schema.get("items", {})
        low, high = schema.get("minItems", 0), schema.get("maxItems", 8)
        if items.get("type") == "string" and "enum" not in items or items.get("type") == "object":
            count = high  # as many pieces of the prompt as the schema allows
        else:
            count = max(low, min(high, 1))
        values = []
        for number in range(count):
            if items.get("type") == "integer":
                values.append(number + 1)
            else:
                values.append(instance(items, text))
            if len(values) >= low and not text[0] and items.get("type") in ("string", "object"):
                break
        return values
    if kind == "string":
        longest = schema.get("maxLength", 400)
        piece, text[0] = text[0][:longest], text[0][longest:]
        if len(piece) < schema.get("minLength", 0):
            piece = piece.ljust(schema["minLength"], ".")
        return piece
    if kind == "integer":
        return schema.get("minimum", 1)
    if kind == "number":
        return schema.get("minimum", 0.5)
    if kind == "boolean":
        return True
    return None


class Quiet(ThreadingHTTPServer):
    """A client killed mid-reply (the kill fault) is expected: no traceback for it."""

    def handle_error(self, request, client_address):
        if not isinstance(sys.exc_info()[1], (BrokenPipeError, ConnectionResetError)):
            super().handle_error(request, client_address)


class Handler(BaseHTTPRequestHandler):
    slow_file = None
    chat_log = None

    def log_message(self, *args):
        pass

    def reply(self, status, body):
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        if self.path == "/api/tags":
            models = [{"name": name, "model": name, "size": 1, "digest": "0"} for name in ("bge-m3:latest", "eco:latest")]
            self.reply(200, {"models": models})
        else:
            self.reply(404, {"error": "404 page not found"})

    def do_POST(self):
        length = int(self.headers.get("Content-Length", "0"))
        try:
            body = json.loads(self.rfile.read(length) or b"{}")
        except ValueError:
            self.reply(400, {"error": "invalid JSON"})
            return
        if self.path == "/api/show":
            self.reply(200, {"details": {"family": "eco"}, "model_info": {"general.architecture": "eco", "eco.context_length": 32768}})
            return
        if self.path == "/api/chat":
            self.chat(body)
            return
        if self.path != "/api/embed":
            self.reply(404, {"error": "404 page not found"})
            return
        if os.path.exists(Handler.slow_file):
            try:
                time.sleep(float(open(Handler.slow_file).read().strip() or "0.2"))
            except (OSError, ValueError):
                time.sleep(0.2)
        inputs = body.get("input", [])
        if isinstance(inputs, str):
            inputs = [inputs]
        self.reply(200, {"model": body.get("model", ""), "embeddings": [embedding(t) for t in inputs]})


    def chat(self, body):
        messages = body.get("messages", [])
        contents = [str(message.get("content", "")) for message in messages]
        prompt = "\n\n".join(contents)
        schema = body.get("format")
        if isinstance(schema, dict):
            reply = json.dumps(instance(schema, ["\n\n".join(reversed(contents))]), ensure_ascii=False)
        elif schema == "json":
            reply = json.dumps({"respuesta": prompt}, ensure_ascii=False)
        else:
            reply = prompt
        with open(Handler.chat_log, "a") as log:
            log.write(json.dumps({"messages": messages, "format": schema, "reply": reply}, ensure_ascii=False) + "\n")
        model = body.get("model", "")
        done = {
            "model": model,
            "created_at": "2024-01-01T00:00:00Z",
            "message": {"role": "assistant", "content": ""},
            "done": True,
            "done_reason": "stop",
            "total_duration": 1000,
            "prompt_eval_count": max(1, len(prompt) // 4),
            "eval_count": max(1, len(reply) // 4),
        }
        if body.get("stream", True) is False:
            done["message"]["content"] = reply
            self.reply(200, done)
            return
        self.send_response(200)
        self.send_header("Content-Type", "application/x-ndjson")
        self.end_headers()
        for start in range(0, len(reply), CHUNK):
            line = {
                "model": model,
                "created_at": "2024-01-01T00:00:00Z",
                "message": {"role": "assistant", "content": reply[start:start + CHUNK]},
                "done": False,
            }
            self.wfile.write((json.dumps(line, ensure_ascii=False) + "\n").encode())
        self.wfile.write((json.dumps(done) + "\n").encode())
        self.wfile.flush()


def main():
    port_file = sys.argv[1]
    Handler.slow_file = os.path.join(os.path.dirname(os.path.abspath(port_file)), "SLOW")
    Handler.chat_log = os.path.join(os.path.dirname(os.path.abspath(port_file)), "chat.jsonl")
    server = Quiet(("127.0.0.1", 0), Handler)
    with open(port_file + ".tmp", "w") as out:
        out.write(str(server.server_address[1]))
    os.replace(port_file + ".tmp", port_file)
    server.serve_forever()


if __name__ == "__main__":
    main()
