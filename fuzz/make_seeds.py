#!/usr/bin/env python3
"""Writes the fuzzers' seed corpora, fuzz/corpus/<target>/.

The seeds come from what the repository already holds, so that they are
realistic and stay in step with the tests:
  usage_normalizer     every {name, provider, R"(json)"} case of
                       daemon/core/usage_normalizer_test.cc, as one byte of
                       provider enum value followed by the JSON;
  canonical_json       the "input" of every case of tests/vectors/
                       canonical_json.json and canonical_json_errors.json;
  snapshot_validation  Snapshot and Usage messages written below in text
  usage_validation     format (the records of daemon/ingest/validation_test.cc
                       and the provider usages above), encoded to the binary
                       wire format with `protoc --encode`;
  lane_tracker         scripted lane histories (LANE_HISTORIES below), in the
                       fuzzer's four-bytes-per-operation form;
  proxy_observe        proxied exchanges (PROXY_EXCHANGES below): a shape
                       byte, the request body, NUL, the response body.

Run from anywhere: python3 fuzz/make_seeds.py. It (over)writes its seed
files and leaves other files in the corpus directories alone; it needs
python3 and protoc (Debian: protobuf-compiler). The build never runs it;
commit what it writes.
"""

import json
import pathlib
import re
import subprocess

ROOT = pathlib.Path(__file__).resolve().parent.parent
CORPUS = ROOT / "fuzz" / "corpus"

PROVIDERS = {
    "PROVIDER_UNSPECIFIED": 0,
    "PROVIDER_ANTHROPIC": 1,
    "PROVIDER_BEDROCK": 2,
    "PROVIDER_OPENAI": 3,
    "PROVIDER_GEMINI": 4,
    "PROVIDER_DASHSCOPE": 5,
    "PROVIDER_DEEPSEEK": 6,
    "PROVIDER_KIMI": 7,
}

# kT0 of daemon/core/test_turns.h; the fuzzers' clock reads kT0 + 1 h.
T0_SECONDS = 1_790_000_000


def corpus_dir(target):
    """The target's corpus directory. Files already there stay: the script
    overwrites its own seeds and leaves those merged in from fuzzing runs."""
    directory = CORPUS / target
    directory.mkdir(parents=True, exist_ok=True)
    return directory


def usage_normalizer_cases():
    """(name, provider value, json) of the normalizer's table-driven tests."""
    source = (ROOT / "daemon/core/usage_normalizer_test.cc").read_text()
    pattern = re.compile(
        r'\{"(\w+)",\s*(?:v1::(PROVIDER_\w+)|static_cast<v1::Provider>\((\d+)\))'
        r',\s*R"\((.*?)\)"', re.S)
    cases = []
    for name, enum_name, number, text in pattern.findall(source):
        provider = PROVIDERS[enum_name] if enum_name else int(number)
        cases.append((name, provider, text))
    return cases


def write_usage_normalizer(cases):
    directory = corpus_dir("usage_normalizer")
    for name, provider, text in cases:
        (directory / name).write_bytes(bytes([provider]) + text.encode())
    return len(cases)


def write_canonical_json():
    directory = corpus_dir("canonical_json")
    seen = set()
    for vectors, prefix in (("canonical_json.json", "vector_"),
                            ("canonical_json_errors.json", "error_")):
        for case in json.loads((ROOT / "tests/vectors" / vectors).read_text()):
            data = case["input"].encode("utf-8", "surrogatepass")
            if data not in seen:  # Two vectors share an input.
                seen.add(data)
                (directory / (prefix + case["name"])).write_bytes(data)
    return len(seen)


def encode(message, text):
    return subprocess.run(
        ["protoc", f"--encode=cachewatch.v1.{message}",
         f"-I{ROOT / 'proto'}", "-I/usr/include",
         "cachewatch/v1/snapshot.proto", "cachewatch/v1/usage.proto"],
        input=text.encode(), capture_output=True, check=True).stdout


def time_text(field, seconds):
    return f"{field} {{ seconds: {seconds} }}"


LANE = 'agent: "agent" session_id: "s1"'

BASE_SNAPSHOT = f"""
{LANE} request_id: "r1" {time_text("request_time", T0_SECONDS)}
provider: PROVIDER_ANTHROPIC model: "claude-sonnet-4-5" system_hash: 42
tools {{ name: "Read" schema_hash: 1 }}
tools {{ name: "Write" schema_hash: 2 }}
tools {{ name: "Bash" schema_hash: 3 }}
cache_control {{ enabled: true }}
"""

SNAPSHOTS = {
    # Accepted.
    "base": BASE_SNAPSHOT,
    "full": f"""
{LANE} lane: "subagent-1" request_id: "r2"
{time_text("request_time", T0_SECONDS + 30)}
provider: PROVIDER_OPENAI model: "gpt-4o" system_hash: 7 options_hash: 9
system_sections {{ name: "date" hash: 11 }}
system_sections {{ name: "git_status" hash: 12 }}
tools {{ name: "Read" schema_hash: 1 }}
cache_control {{
  enabled: true automatic: false ttl_seconds: 3600
  breakpoints {{ segment: PROMPT_SEGMENT_TOOLS index: 0 }}
  breakpoints {{ segment: PROMPT_SEGMENT_SYSTEM index: 1 ttl_seconds: 300 }}
  breakpoints {{ segment: PROMPT_SEGMENT_MESSAGES index: 2 }}
}}
message_chain: [101, 102, 103]
expected_drop: EXPECTED_DROP_COMPACTION
tool_order_policy: TOOL_ORDER_POLICY_LEXICOGRAPHIC
""",
    # Rejected, one field each.
    "no_agent": BASE_SNAPSHOT.replace('agent: "agent" ', ""),
    "time_1999": BASE_SNAPSHOT.replace(str(T0_SECONDS), "915148800"),
    "time_future": BASE_SNAPSHOT.replace(str(T0_SECONDS),
                                         str(T0_SECONDS + 3 * 86400)),
    "unknown_provider": BASE_SNAPSHOT.replace("PROVIDER_ANTHROPIC", "99"),
    "empty_tool_name": BASE_SNAPSHOT.replace('"Write"', '""'),
    "breakpoint_past_chain": BASE_SNAPSHOT.replace(
        "cache_control { enabled: true }",
        "message_chain: 1 cache_control { enabled: true breakpoints {"
        " segment: PROMPT_SEGMENT_MESSAGES index: 5 } }"),
    "unknown_expected_drop": BASE_SNAPSHOT + "expected_drop: 42",
}

# One realistic raw usage per provider, from the normalizer's tests.
RAW_USAGES = {
    "PROVIDER_ANTHROPIC": "anthropic_1h_write",
    "PROVIDER_BEDROCK": "bedrock_cache_details",
    "PROVIDER_OPENAI": "openai_responses_azure_cache_write",
    "PROVIDER_GEMINI": "gemini_usage_metadata_with_thoughts",
    "PROVIDER_DASHSCOPE": "dashscope_explicit_cache_creation",
    "PROVIDER_DEEPSEEK": "deepseek_hit_and_miss",
    "PROVIDER_KIMI": "kimi_top_level_cached_tokens",
}

BASE_USAGE_KEY = f"""
{LANE} request_id: "r1" {time_text("response_time", T0_SECONDS + 1)}
"""

NORMALIZED = """
normalized { uncached_input_tokens: 300 cache_read_tokens: 100
             cache_write_tokens: 200 cache_write_5m_tokens: 150
             cache_write_1h_tokens: 50 output_tokens: 100 }
"""


def text_string(value):
    return json.dumps(value)  # A JSON string is a valid text-format string.


def usages(cases):
    by_name = {name: text for name, _, text in cases}
    result = {
        # Accepted.
        "normalized": BASE_USAGE_KEY + "provider: PROVIDER_ANTHROPIC"
                      ' model: "claude-sonnet-4-5"' + NORMALIZED +
                      'provider_diagnostics { cache_miss_reason:'
                      ' "tools_changed" cache_missed_input_tokens: 2048 }',
        # Rejected, one field each.
        "no_request_id": BASE_USAGE_KEY.replace('request_id: "r1" ', "") +
                         "provider: PROVIDER_ANTHROPIC" + NORMALIZED,
        "no_response_time": f'{LANE} request_id: "r1"'
                            " provider: PROVIDER_ANTHROPIC" + NORMALIZED,
        "no_counts": BASE_USAGE_KEY + "provider: PROVIDER_ANTHROPIC",
        "negative_normalized": BASE_USAGE_KEY + "provider: PROVIDER_ANTHROPIC"
                               " normalized { cache_read_tokens: -5 }",
        "malformed_raw": BASE_USAGE_KEY + "provider: PROVIDER_ANTHROPIC"
                         ' raw_usage_json: "{\\"input_tokens\\": 12,"',
    }
    for provider, case in RAW_USAGES.items():
        result["raw_" + case] = (
            BASE_USAGE_KEY + f"provider: {provider}"
            f" raw_usage_json: {text_string(by_name[case])}")
    return result


def write_protos(target, message, records, prefix):
    directory = corpus_dir(target)
    for name, text in records.items():
        (directory / f"{prefix}_{name}").write_bytes(encode(message, text))
    return len(records)


# Lane histories for lane_tracker_fuzzer.cc, after its configuration byte:
# (operation, lane, request,
# time in 20 s units, shape) per step. Operations: 0 snapshot, 1 usage,
# 2 both, 3 expiry. Shape bits: 1 tools swapped, 2 schema changed, 4 system
# changed, 8 model changed, 16 cache off, 32 history rewritten, 64 expected
# drop (128: the previous request aborted); for a usage, bits 0-1 pick the
# cache read and bit 2 a cache write.
LANE_HISTORIES = {
    "every_reason": [(2, 0, 0, 0, 0), (2, 0, 1, 1, 3), (2, 0, 2, 2, 1),
                     (2, 0, 3, 3, 2), (2, 0, 4, 4, 4), (2, 0, 5, 5, 8),
                     (2, 0, 6, 6, 16), (2, 0, 7, 7, 32), (2, 0, 0, 30, 2)],
    "out_of_order": [(0, 0, 0, 0, 0), (0, 0, 1, 1, 1), (1, 0, 1, 1, 6),
                     (1, 0, 0, 0, 2), (1, 0, 1, 1, 6)],
    "three_lanes_evict": [(2, 0, 0, 0, 0), (2, 1, 0, 1, 4), (2, 2, 0, 2, 8),
                          (2, 0, 1, 3, 3), (3, 0, 0, 200, 0),
                          (2, 1, 1, 250, 3)],
    "unpaired_then_expire": [(0, 0, 0, 0, 0), (0, 0, 1, 1, 0),
                             (2, 0, 2, 2, 3), (3, 0, 0, 255, 0),
                             (3, 0, 0, 255, 0), (3, 0, 0, 255, 0),
                             (2, 0, 3, 3, 3)],
    "expected_drops": [(2, 0, 0, 0, 0), (2, 0, 1, 1, 64 | 4),
                       (0, 0, 2, 2, 0), (2, 0, 3, 3, 192), (1, 0, 2, 2, 0)],
    "more_released_than_remembered": [(0, 0, 0, 0, 0), (2, 0, 1, 1, 3),
                                      (2, 0, 2, 2, 3), (2, 0, 3, 3, 3),
                                      (1, 0, 0, 0, 3)],
}


def write_lane_histories():
    directory = corpus_dir("lane_tracker")
    for name, steps in LANE_HISTORIES.items():
        data = bytearray([1])  # The small pending cap of 4 per lane.
        for operation, lane, request, time, shape in steps:
            data += bytes([operation | lane << 2, request, time, shape])
        (directory / f"history_{name}").write_bytes(bytes(data))
    return len(LANE_HISTORIES)


def write_transcripts():
    """The import fixtures (tests/fixtures/import), one seed per JSONL file,
    behind the byte that selects its reader."""
    directory = corpus_dir("transcript")
    readers = {"claude-code": 0, "codex": 1, "gemini": 2}
    count = 0
    for agent, selector in readers.items():
        for path in sorted((ROOT / "tests/fixtures/import" / agent).rglob("*.jsonl")):
            name = f"{agent}_{path.stem[:24]}"
            (directory / name).write_bytes(bytes([selector]) + path.read_bytes())
            count += 1
    return count


ANTHROPIC_REQUEST = {
    "model": "claude-sonnet-4-5", "max_tokens": 1024,
    "system": [{"type": "text", "text": "You are an agent."},
               {"type": "text", "text": "Today is 2026-12-01.",
                "cache_control": {"type": "ephemeral"}}],
    "tools": [{"name": "read", "input_schema": {"type": "object"},
               "cache_control": {"type": "ephemeral", "ttl": "1h"}}],
    "messages": [
        {"role": "user", "content": "Fix the test"},
        {"role": "assistant", "content": [
            {"type": "tool_use", "id": "t1", "name": "read", "input": {}}]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "t1", "content": "ok",
             "cache_control": {"type": "ephemeral"}}]}],
    "thinking": {"type": "enabled", "budget_tokens": 2000},
    "metadata": {"user_id": "user_ab_account__session_0a1b-2c3d"},
}
CHAT_REQUEST = {
    "model": "gpt-5", "stream": True, "stream_options": {"include_usage": True},
    "messages": [{"role": "system", "content": "Be brief."},
                 {"role": "user", "content": [{"type": "text", "text": "hi"}]},
                 {"role": "assistant", "content": None, "tool_calls": [
                     {"id": "c", "type": "function",
                      "function": {"name": "f", "arguments": "{}"}}]},
                 {"role": "tool", "tool_call_id": "c", "content": "4"}],
    "tools": [{"type": "function", "function": {"name": "f"}}],
    "prompt_cache_key": "conversation-1",
}
RESPONSES_REQUEST = {
    "model": "gpt-5.6", "instructions": "Be brief.",
    "input": [{"role": "user", "content": "hi"},
              {"type": "compaction", "encrypted_content": "x"}],
    "reasoning": {"effort": "low"}, "prompt_cache_retention": "24h",
}
ANTHROPIC_RESPONSE = {
    "id": "msg_1", "model": "claude-sonnet-4-5",
    "usage": {"input_tokens": 3, "cache_read_input_tokens": 900,
              "cache_creation_input_tokens": 10, "output_tokens": 5},
    "diagnostics": {"cache_miss_reason": {
        "type": "tools_changed", "cache_missed_input_tokens": 10}},
}
ANTHROPIC_STREAM = (
    "event: message_start\r\ndata: " + json.dumps({
        "type": "message_start", "message": {
            "id": "msg_2", "model": "m", "usage": {"input_tokens": 1}}})
    + "\r\n\r\n: ping\r\n\r\nevent: message_delta\r\ndata: "
    + json.dumps({"type": "message_delta", "usage": {"output_tokens": 7}})
    + "\r\n\r\nevent: message_stop\r\ndata: {}\r\n\r\n")
CHAT_STREAM = (
    "data: " + json.dumps({"id": "chatcmpl-1", "model": "gpt-5",
                           "choices": [], "usage": None})
    + "\n\ndata: " + json.dumps({
        "id": "chatcmpl-1", "choices": [],
        "usage": {"prompt_tokens": 9, "completion_tokens": 1,
                  "prompt_tokens_details": {"cached_tokens": 0}}})
    + "\n\ndata: [DONE]\n\n")
RESPONSES_STREAM = (
    "event: response.created\ndata: " + json.dumps({
        "type": "response.created", "response": {"id": "resp_1"}})
    + "\n\nevent: response.completed\ndata: " + json.dumps({
        "type": "response.completed", "response": {
            "id": "resp_1", "usage": {"input_tokens": 4, "output_tokens": 1},
            "prompt_cache_diagnostics": {"type": "cache_miss",
                                         "reason": "tools_changed",
                                         "cache_missed_tokens": 3}}})
    + "\n\n")

# name: (shape byte, request body, response body); the shape's bits are
# described in fuzz/proxy_observe_fuzzer.cc.
PROXY_EXCHANGES = {
    "anthropic_json": (0, json.dumps(ANTHROPIC_REQUEST),
                       json.dumps(ANTHROPIC_RESPONSE)),
    "anthropic_stream": (3 | 4, json.dumps(ANTHROPIC_REQUEST),
                         ANTHROPIC_STREAM),
    "anthropic_stream_cut": (4 | 8, json.dumps(ANTHROPIC_REQUEST),
                             ANTHROPIC_STREAM[:200]),
    "anthropic_http_500": (16, json.dumps(ANTHROPIC_REQUEST), "{}"),
    "chat_stream": (1 | 4, json.dumps(CHAT_REQUEST), CHAT_STREAM),
    "responses_stream": (2 | 4, json.dumps(RESPONSES_REQUEST),
                         RESPONSES_STREAM),
    "responses_previous": (2, json.dumps(dict(
        RESPONSES_REQUEST, previous_response_id="resp_0")),
                           json.dumps({"id": "resp_2", "usage": {
                               "input_tokens": 1}})),
    "malformed_request": (0, '{"model": "m", "messages": [', ""),
}


def write_proxy_observe():
    directory = corpus_dir("proxy_observe")
    for name, (shape, request, response) in PROXY_EXCHANGES.items():
        data = bytes([shape]) + request.encode() + b"\0" + response.encode()
        (directory / f"exchange_{name}").write_bytes(data)
    return len(PROXY_EXCHANGES)


def main():
    cases = usage_normalizer_cases()
    counts = {
        "usage_normalizer": write_usage_normalizer(cases),
        "canonical_json": write_canonical_json(),
        "snapshot_validation": write_protos(
            "snapshot_validation", "Snapshot", SNAPSHOTS, "snapshot"),
        "usage_validation": write_protos(
            "usage_validation", "Usage", usages(cases), "usage"),
        "lane_tracker": write_lane_histories(),
        "transcript": write_transcripts(),
        "proxy_observe": write_proxy_observe(),
    }
    for target, count in counts.items():
        print(f"fuzz/corpus/{target}: {count} seeds")


if __name__ == "__main__":
    main()
