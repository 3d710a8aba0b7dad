/**
 * `@toolbridge/app`: offer a Node.js (or Electron main-process) app's tools to AI agents
 * through the toolbridge daemon. See the package README, the docs page docs/embedding-typescript.md and
 * protocol.md for the wire contract this implements.
 *
 * ```ts
 * import { App } from "@toolbridge/app";
 * const app = new App({ name: "Notes" });
 * app.tool("echo", { inputSchema: { type: "object", properties: { text: { type: "string" } } } },
 *   async ({ text }) => text);
 * app.resource("notes://today", { mimeType: "text/markdown" }, async () => "# Today");   // protocol v2
 * await app.connect();
 * ```
 */
export { App, CONNECT_TIMEOUT_MS, ENV_INSTANCE_ID, FATAL_REGISTRATION_CODES } from "./app.js";
export type { AppEvents, AppOptions, ConnectionState, ToolDeclaration } from "./app.js";
export { Backoff } from "./backoff.js";
export type { ConnectOptions } from "./firstconnect.js";
export type { BackoffOptions } from "./backoff.js";
export type {
  CompleteContext, ElicitRequest, Elicitation, PromptContext, RequestContext, ResourceContext, ToolContext,
} from "./context.js";
export { LOG_BURST, LOG_RATE, LogBucket, logMessage } from "./applog.js";
export {
  DEFAULT_HOST, ENV_HOME, ENV_HOST, ENV_PORT, ENV_TLS, ENV_TLS_CA, ENV_TOKEN, RUNTIME_FILE, TOKEN_FILE,
  defaultHome, findDaemon, readRuntime, readToken, resolveHome,
} from "./discovery.js";
export type { DaemonAddress, DiscoveryOptions, RuntimeInfo } from "./discovery.js";
export {
  CallCancelled, CallTimeout, ConnectAborted, ConnectTimeout, ConnectionClosed, DaemonNotFound, ElicitationError, InstanceReplaced,
  LocalProtocolError, ProtocolError, RegistrationRejected, RemoteProtocolError, ToolDefinitionError,
  ToolError, ToolUpdateRejected, ToolbridgeError,
} from "./errors.js";
export { failure, image, result, text, toToolResult } from "./results.js";
export type { ContentBlock, ResultInit } from "./results.js";
export type { Logger } from "./session.js";
export {
  MAX_COMPLETION_VALUES, MAX_PROMPT_ARGUMENTS, MAX_RESOURCES, definePrompt, defineResource, defineTemplate, findResource, runCompleter,
} from "./resources.js";
export type {
  BlobResourceContent, CompleteFunction, CompleteSpec, CompletionAnswer, PromptArgument, PromptContent, PromptHandler, PromptMessage, PromptOptions,
  PromptValue, ResourceContent, ResourceHandler, ResourceOptions, ResourceValue, TemplateHandler, TemplateOptions, TemplateVariableNames,
  TemplateVariables, TextResourceContent,
} from "./resources.js";
export { APP_NAME_PATTERN, MAX_EXAMPLE_REQUEST_CHARS, MAX_EXAMPLE_REQUESTS, MAX_SCHEMA_BYTES, TOOL_NAME_PATTERN, defineTool, isZodSchema } from "./tools.js";
export type { Schema, ToJsonSchema, ToolHandler, ToolOptions, ZodLike, ZodOutput } from "./tools.js";
export {
  DEFAULT_MAX_LINE_BYTES, LOG_LEVELS, LineFramer, MAX_LOG_DATA_BYTES, PROTOCOL_VERSION, RESOURCES_VERSION, decodeMessage, encodeMessage,
} from "./wire.js";
export type {
  Complete, ElicitResult, Json, JsonObject, LogLevel, PromptArgumentSpec, PromptGet, PromptSpec, Registered, ResourceRead, ResourceSpec, ResourceTemplateSpec,
  ToolResult, ToolSpec,
} from "./wire.js";
