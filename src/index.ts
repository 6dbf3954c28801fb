export { Sandbox } from './sandbox/sandbox.js';
export type { BlockError, ExecuteResult, HostCallHandler, SandboxOptions, Variable } from './sandbox/sandbox.js';
export type { HostCall, HostCallKind } from './sandbox/protocol.js';
export { RlmError, ConfigurationError, SandboxError } from './errors.js';
export { DEFAULTS } from './defaults.js';
