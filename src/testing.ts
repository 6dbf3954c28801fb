// Test doubles for programs built on rlm: `import { ScriptedModel, startFakeOpenAIServer } from 'rlm/testing'`.
export { ScriptedModel } from './testing/scripted-model.js';
export type { ReplyFunction, ScriptedReply, ScriptedToolCall } from './testing/scripted-model.js';
export { startFakeOpenAIServer } from './testing/fake-openai-server.js';
export type { FakeOpenAIServer, FakeOpenAIServerOptions, FakeReply, FakeRequest } from './testing/fake-openai-server.js';
