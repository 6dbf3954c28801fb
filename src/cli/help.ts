// Help texts of the commands, kept apart so the help is shown without loading any command.

export const RUN_EXAMPLES = `
Examples:
  $ rlm run --context report.txt "What are the three biggest risks?"
  $ rlm run --context logs/ --model gpt-5 --sub-model gpt-5-mini "Which service failed first, and why?"
  $ cat big.jsonl | rlm run --context - --json "How many records mention refunds?"
  $ rlm run --context a.txt --context b.txt --max-budget 0.50 "Compare the two contracts."
  $ rlm run --base-url http://localhost:11434/v1 --model llama3.1 --context notes.md "Summarize"

Context files: a text file becomes a string, .json is parsed, .jsonl becomes an array of records,
a folder becomes an array of { path, content }, and - reads standard input. Several --context
flags make an array.

Environment: OPENAI_API_KEY, OPENAI_BASE_URL, RLM_MODEL, RLM_SUB_MODEL (flags win).
Exit codes: 0 answer, 1 run failed or hit a limit (partial answer printed), 2 usage or
configuration error, 130 interrupted (Ctrl-C), 143 terminated (SIGTERM).`;

export const SERVE_EXAMPLES = `
Examples:
  $ rlm serve --base-url http://localhost:11434/v1
  $ curl http://127.0.0.1:8431/v1/chat/completions -H 'content-type: application/json' \\
      -d '{"model": "qwen2.5:7b", "messages": [{"role": "system", "content": "<a huge document>"},
           {"role": "user", "content": "Who signed it?"}]}'
  $ RLM_AUTH_TOKEN=secret rlm serve --host 0.0.0.0 --port 8080 --max-budget 1 --price my-model=0.2,0.8

A request's model "root:sub" picks the root and sub models; a plain name is used for both (names
the upstream lists whole, like "qwen2.5:7b", are never split; "rlm_sub_model" in the body also
names the sub model). The last user message is the question; the system messages and earlier turns
(or "rlm_context" in the body) are the context. Tools in the request are the caller's: their calls
come back as tool_calls, and the request with the results resumes the run.

Stop with Ctrl-C or SIGTERM: requests in progress get 30 s to finish, then every run is stopped.`;

export const BATCH_EXAMPLES = `
Examples:
  $ rlm batch tasks.jsonl --out results.jsonl --concurrency 8 --scorer contains
  $ rlm batch tasks.jsonl --out results.jsonl --max-budget 5 --task-budget 0.10 --price my-model=0.5,2
  $ rlm batch tasks.jsonl --out results.jsonl --retry-failed --json

A task line: {"id": "q1", "query": "...", "context": ... | "context_path": "a.txt" | "context_paths": [...],
"expected"?: ..., "model"?, "sub_model"?, "output_schema"?, "max_iterations"?}; OpenAI Batch API lines
({"custom_id", "method": "POST", "url": "/v1/chat/completions", "body"}) work too, and get their results
in that API's output shape. --max-budget holds for the whole batch; --task-budget for each task.
Running the same command again skips completed tasks (Ctrl-C keeps every finished one).

Exit codes: 0 every task completed, 1 a task failed or was not run (budget spent), 2 usage error
(a bad tasks line is named), 130 interrupted (Ctrl-C), 143 terminated (SIGTERM).`;
