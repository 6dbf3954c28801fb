/**
 * How an API names the caller's tool results, so the errors about them say what to send: the
 * chat-completions API takes `tool` messages, the Responses API `function_call_output` items.
 */
export interface ToolResultWording {
  /** The request field that carries the results. */
  param: string;
  /** What to send for each call handed back. */
  perCall: string;
  /** How to start over when the run is gone. */
  startOver: string;
}

export const CHAT_TOOL_RESULTS: ToolResultWording = {
  param: 'messages',
  perCall: 'send one tool message per tool call',
  startOver: 'Send the conversation again without its tool results to start over.',
};

export const RESPONSES_TOOL_RESULTS: ToolResultWording = {
  param: 'input',
  perCall: 'send one function_call_output item per function call',
  startOver: 'Send the input again without its function_call_output items to start over.',
};
