"""The reference Python RLM (the `rlm` package), measured the way bench/lm.ts and bench/sandbox.ts
measure rlm: code run in the REPL environment that RLM.completion gives the root model, with its
llm_query answered by the local fake OpenAI server the bench started. Prints one JSON line: the
figures in milliseconds, or {"error": reason} when the package cannot be driven this way.

    python reference.py subcalls FAST_URL SLOW_URL CALLS PROMPTS
    python reference.py context BASE_URL MEGABYTES
"""

import contextlib
import gc
import json
import os
import statistics
import sys
import time

# The same 16 requests in flight as rlm is given: older versions of the package read these when it
# is imported; newer ones hold 16 in flight for each llm_query_batched (LMHandler.batch_max_concurrent).
os.environ.setdefault("OPENAI_BATCH_CHUNK_SIZE", "16")
os.environ.setdefault("OPENAI_MAX_CONCURRENT_REQUESTS", "16")
os.environ.setdefault("OPENAI_API_KEY", "unused")

RUNS = 3
WARM_UP_CALLS = 20
LINE = "The quick brown fox jumps over the lazy dog. 0123456789\n"


class HarnessError(Exception):
    """What the harness could not find or do; reported in place of the figures."""


@contextlib.contextmanager
def repl_environment(base_url):
    """(LM handler, REPL environment), as RLM.completion sets them up, for one `with` block."""
    with completion_context(base_url) as handler_and_environment:
        yield handler_and_environment
    # The completion's objects form reference cycles, so they outlive it until the collector runs.
    # Left to run on its own, it may do so during a later batch, when the AsyncOpenAI client it
    # frees schedules closing its connections on that batch's loop; they belong to a loop already
    # closed, and the failure is printed into the stderr of the REPL block then running. Collected
    # here, with no loop running, the client is freed quietly.
    gc.collect()


def completion_context(base_url):
    try:
        from rlm import RLM
    except ImportError as error:
        raise HarnessError(f"cannot import RLM from rlm ({error})") from error
    backend_kwargs = {"model_name": "fake-model", "base_url": base_url, "api_key": "unused"}
    try:
        rlm = RLM(backend="openai", backend_kwargs=backend_kwargs, environment="local")
    except TypeError as error:
        raise HarnessError(f"RLM(backend='openai', backend_kwargs=..., environment='local') failed: {error}") from error
    # Private, but the only way to the REPL of a completion without scripting a root model.
    spawn = getattr(rlm, "_spawn_completion_context", None)
    if spawn is None:
        raise HarnessError("RLM has no _spawn_completion_context, which sets up the REPL environment of a completion")
    return spawn("")


def run_block(environment, code):
    result = environment.execute_code(code)
    if result.stderr.strip():
        raise HarnessError(f"a REPL block failed: {result.stderr.strip().splitlines()[-1]}")
    return result.stdout


def median_ms(action):
    times = []
    for _ in range(RUNS):
        started = time.perf_counter()
        action()
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


def sequential_block(calls):
    # A failed llm_query returns its error as text, so every answer is checked.
    return (
        f"for i in range({calls}):\n"
        "    answer = llm_query('q' + str(i))\n"
        "    if answer != 'ok':\n"
        "        raise RuntimeError(answer)\n"
    )


def batched_block(prompts):
    return (
        f"answers = llm_query_batched(['prompt ' + str(i) for i in range({prompts})])\n"
        "wrong = [answer for answer in answers if answer != 'ok']\n"
        f"if len(answers) != {prompts}:\n"
        "    raise RuntimeError(str(len(answers)) + ' answers')\n"
        "if wrong:\n"
        "    raise RuntimeError(wrong[0])\n"
    )


def subcall_figures(fast_url, slow_url, calls, prompts):
    calls, prompts = int(calls), int(prompts)
    with repl_environment(fast_url) as (_, environment):
        run_block(environment, sequential_block(WARM_UP_CALLS))
        sequential = median_ms(lambda: run_block(environment, sequential_block(calls))) / calls
    # The package answers each llm_query_batched on an event loop of its own (asyncio.run in
    # LMHandler), while the completion's AsyncOpenAI client keeps its pooled connections: the second
    # batch in one completion finds them bound to the first batch's closed loop and every prompt
    # fails with "Event loop is closed". So each batch gets a completion of its own, set up outside
    # the timing; its connections are opened inside it, as they are for every batch the package runs.
    batched_once(slow_url, 16)  # warm-up: imports and first-call paths, as rlm's side has
    batched = statistics.median(batched_once(slow_url, prompts) for _ in range(RUNS))
    return {"sequentialMsPerCall": sequential, "batchedMs": batched}


def batched_once(base_url, prompts):
    """Milliseconds for one llm_query_batched of `prompts`, the first batch of a fresh completion."""
    with repl_environment(base_url) as (_, environment):
        started = time.perf_counter()
        run_block(environment, batched_block(prompts))
        return (time.perf_counter() - started) * 1000


def context_figures(base_url, megabytes):
    text = LINE * -(-int(megabytes) * 1_000_000 // len(LINE))
    with repl_environment(base_url) as (_, environment):
        load = getattr(environment, "load_context", None)
        if load is None:
            raise HarnessError(f"the REPL environment ({type(environment).__name__}) has no load_context")
        loaded = median_ms(lambda: load(text))
        length = run_block(environment, "print(len(context))").strip()
        if length != str(len(text)):
            raise HarnessError(f"context holds {length} characters after loading, not {len(text)}")
    return {"contextLoadMs": loaded}


MODES = {"subcalls": subcall_figures, "context": context_figures}

if __name__ == "__main__":
    try:
        mode = MODES.get(sys.argv[1] if len(sys.argv) > 1 else "")
        if mode is None:
            raise HarnessError(f"usage: reference.py {'|'.join(MODES)} ARGS")
        print(json.dumps(mode(*sys.argv[2:])))
    except Exception as error:  # noqa: BLE001 - any failure becomes the bench's "failed: <reason>"
        reason = str(error) if isinstance(error, HarnessError) else f"{type(error).__name__}: {error}"
        print(json.dumps({"error": reason}))
        sys.exit(1)
