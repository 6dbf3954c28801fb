// Test doubles for programs built on rlm: `import { ScriptedModel, startFakeOpenAIServer } from 'rlm/testing'`.
export { ScriptedModel } from './testing/scripted-model.js';
export type { ReplyFunction, ScriptedReply, ScriptedToolCall } from './testing/scripted-model.js';
export { DEFAULT_FAULT_MIX, startFakeOpenAIServer } from './testing/fake-openai-server.js';
export type { FakeFault, FakeOpenAIServer, FakeOpenAIServerOptions, FakeReply, FakeRequest } from './testing/fake-openai-server.js';
export { NOT_FOUND, rlmStrategyReply } from './testing/rlm-strategy.js';
export { needleTask } from './testing/needle-task.js';
export type { NeedleTask } from './testing/needle-task.js';
