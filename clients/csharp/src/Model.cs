// The public values of the library: results, content blocks, errors, and the declarations of
// tools, resources, templates and prompts.
using System;
using System.Collections.Generic;
using System.Threading;
using System.Threading.Tasks;

namespace Toolbridge
{
    /// <summary>A failure meant for the model: its message reaches the agent as it is.
    /// Any other exception a handler throws is masked (the agent sees a generic message).</summary>
    public class ToolError : Exception
    {
        public ToolError(string message) : base(message) { }
        public ToolError(string message, string errorKind) : base(message) { ErrorKind = errorKind; }

        /// <summary>protocol.md's errorKind (e.g. invalid_arguments); null means app_error.</summary>
        public string ErrorKind { get; private set; }
    }

    /// <summary>The broker refused the registration for good (protocol.md section 2, "Do not retry").</summary>
    public sealed class RegistrationRejectedException : Exception
    {
        public RegistrationRejectedException(string code, string message) : base(code + ": " + message) { Code = code; }
        public string Code { get; private set; }
    }

    /// <summary>Another process registered this app's instanceId, so the broker closed this link
    /// (error "replaced"): reconnecting would only take it back, so RunAsync ends with this.</summary>
    public sealed class InstanceReplacedException : Exception
    {
        public InstanceReplacedException(string message) : base(message) { }
    }

    /// <summary>Content blocks for results and prompt messages (MCP's shapes).</summary>
    public static class Content
    {
        public static JsonObject Text(string text)
        {
            return new JsonObject().With("type", "text").With("text", text);
        }

        public static JsonObject Image(byte[] data, string mimeType)
        {
            return new JsonObject().With("type", "image").With("data", Convert.ToBase64String(data)).With("mimeType", mimeType);
        }

        public static JsonObject Audio(byte[] data, string mimeType)
        {
            return new JsonObject().With("type", "audio").With("data", Convert.ToBase64String(data)).With("mimeType", mimeType);
        }

        /// <summary>An embedded text resource (for prompt messages).</summary>
        public static JsonObject Resource(string uri, string mimeType, string text)
        {
            var resource = new JsonObject().With("uri", uri);
            if (mimeType != null) resource["mimeType"] = mimeType;
            resource["text"] = text;
            return new JsonObject().With("type", "resource").With("resource", resource);
        }
    }

    /// <summary>A tool's result. Handlers may also return plain values (they become data).</summary>
    public sealed class ToolResult
    {
        public bool Success = true;
        public object Data;
        public string Error;
        public IList<JsonObject> Content;
        public object StructuredContent;
        public string ErrorKind;

        public static ToolResult WithContent(params JsonObject[] blocks)
        {
            return new ToolResult { Content = new List<JsonObject>(blocks) };
        }

        public static ToolResult Structured(object value)
        {
            return new ToolResult { Data = value, StructuredContent = value };
        }

        public static ToolResult Image(byte[] data, string mimeType, string caption = null)
        {
            var blocks = new List<JsonObject>();
            if (caption != null) blocks.Add(Toolbridge.Content.Text(caption));
            blocks.Add(Toolbridge.Content.Image(data, mimeType));
            return new ToolResult { Content = blocks };
        }

        internal JsonObject ToJson()
        {
            var result = new JsonObject().With("success", Success);
            if (Data != null) result["data"] = Data;
            if (Error != null) result["error"] = Error;
            if (Content != null) result["content"] = Content;
            if (StructuredContent != null) result["structuredContent"] = StructuredContent;
            if (ErrorKind != null) result["errorKind"] = ErrorKind;
            return result;
        }
    }

    public delegate Task<object> ToolHandler(JsonObject arguments, ToolContext context);

    /// <summary>A tool declaration (protocol.md section 2) with its handler.</summary>
    public sealed class ToolDefinition
    {
        public string Name;
        public string Description = "";
        /// <summary>JsonObject, or JsonRaw for a schema given as a string.</summary>
        public object InputSchema;
        public object OutputSchema;
        public string Title;
        public JsonObject Annotations;
        public int? TimeoutMs;
        public bool? PathGuard;
        /// <summary>Typical requests a user would make that this tool serves ("we just unloaded the truck"):
        /// only the daemon's tool search reads them, so agents find the tool from everyday words (protocol.md,
        /// exampleRequests). At most 16, each 1-200 characters and not only whitespace; App.AddTool checks them.</summary>
        public string[] ExampleRequests;
        public ToolHandler Handler;

        /// <summary>The daemon's limits on exampleRequests (it refuses a tool that breaks them with invalid_tool).</summary>
        public const int MaxExampleRequests = 16;
        public const int MaxExampleRequestChars = 200;

        internal JsonObject ToJson()
        {
            var tool = new JsonObject().With("name", Name).With("description", Description ?? "");
            tool["inputSchema"] = InputSchema ?? new JsonObject().With("type", "object");
            if (OutputSchema != null) tool["outputSchema"] = OutputSchema;
            if (Title != null) tool["title"] = Title;
            if (Annotations != null) tool["annotations"] = Annotations;
            if (TimeoutMs.HasValue) tool["timeoutMs"] = TimeoutMs.Value;
            if (PathGuard.HasValue) tool["pathGuard"] = PathGuard.Value;
            // An empty list is the same as none, so it is left out.
            if (ExampleRequests != null && ExampleRequests.Length > 0) tool["exampleRequests"] = new List<object>(ExampleRequests);
            return tool;
        }

        /// <summary>Throws ArgumentException when ExampleRequests breaks the daemon's limits, so the
        /// mistake shows when the tool is added, not as a refused registration later.</summary>
        internal void CheckExampleRequests()
        {
            if (ExampleRequests == null) return;
            var fix = "give at most " + MaxExampleRequests + " strings of 1-" + MaxExampleRequestChars + " characters, not only whitespace";
            if (ExampleRequests.Length > MaxExampleRequests)
                throw new ArgumentException("the tool '" + Name + "': ExampleRequests has " + ExampleRequests.Length + " entries, over the limit of "
                    + MaxExampleRequests + "; keep the most typical ones");
            for (var i = 0; i < ExampleRequests.Length; i++)
            {
                var text = ExampleRequests[i];
                if (string.IsNullOrWhiteSpace(text))
                    throw new ArgumentException("the tool '" + Name + "': ExampleRequests[" + i + "] is " + (text == null ? "null" : "empty or only whitespace") + "; " + fix);
                // Characters are counted in code points, as the daemon (Python) counts them, not UTF-16 units.
                var chars = 0;
                for (var at = 0; at < text.Length; at++)
                    if (!(char.IsLowSurrogate(text[at]) && at > 0 && char.IsHighSurrogate(text[at - 1]))) chars++;
                if (chars > MaxExampleRequestChars)
                    throw new ArgumentException("the tool '" + Name + "': ExampleRequests[" + i + "] \"" + text.Substring(0, 40) + "...\" is "
                        + chars + " characters; " + fix);
            }
        }
    }

    /// <summary>What a resource read returns: text or bytes.</summary>
    public sealed class ResourceContents
    {
        public string Uri;
        public string MimeType;
        public string Text;
        public byte[] Blob;

        internal JsonObject ToJson()
        {
            var item = new JsonObject().With("uri", Uri);
            if (MimeType != null) item["mimeType"] = MimeType;
            if (Blob != null) item["blob"] = Convert.ToBase64String(Blob);
            else item["text"] = Text ?? "";
            return item;
        }
    }

    /// <summary>Suggestions for a completion (protocol.md section 12).</summary>
    public sealed class Completion
    {
        public IList<string> Values = new List<string>();
        public int? Total;
        public bool? HasMore;
    }

    /// <summary>Completes one argument: (value typed so far, other arguments, cancel) to suggestions.</summary>
    public delegate Task<Completion> Completer(string value, IDictionary<string, string> arguments, CancellationToken cancel);

    /// <summary>Reads a resource; returns a string (text), byte[] (blob) or ResourceContents / a list of them.</summary>
    public delegate Task<object> ResourceReader(RequestContext context);

    /// <summary>Reads a template's resource with the URI's variables (percent-decoded).</summary>
    public delegate Task<object> TemplateReader(IDictionary<string, string> variables, RequestContext context);

    /// <summary>Renders a prompt; returns a string (one user message), a PromptResult, or a list of messages.</summary>
    public delegate Task<object> PromptRenderer(IDictionary<string, string> arguments, RequestContext context);

    public sealed class ResourceDefinition
    {
        public string Uri;
        public string Name;
        public string Title;
        public string Description;
        public string MimeType;
        public long? Size;
        public ResourceReader Read;

        internal JsonObject ToJson()
        {
            var item = new JsonObject().With("uri", Uri).With("name", Name);
            if (Title != null) item["title"] = Title;
            if (Description != null) item["description"] = Description;
            if (MimeType != null) item["mimeType"] = MimeType;
            if (Size.HasValue) item["size"] = Size.Value;
            return item;
        }
    }

    public sealed class TemplateDefinition
    {
        public string UriTemplate;
        public string Name;
        public string Title;
        public string Description;
        public string MimeType;
        public TemplateReader Read;
        public IDictionary<string, Completer> Complete = new Dictionary<string, Completer>();

        internal JsonObject ToJson()
        {
            var item = new JsonObject().With("uriTemplate", UriTemplate).With("name", Name);
            if (Title != null) item["title"] = Title;
            if (Description != null) item["description"] = Description;
            if (MimeType != null) item["mimeType"] = MimeType;
            return item;
        }
    }

    public sealed class PromptArgument
    {
        public string Name;
        public string Description;
        public bool Required;
    }

    public sealed class PromptDefinition
    {
        public string Name;
        public string Title;
        public string Description;
        public IList<PromptArgument> Arguments = new List<PromptArgument>();
        public PromptRenderer Render;
        public IDictionary<string, Completer> Complete = new Dictionary<string, Completer>();

        internal JsonObject ToJson()
        {
            var item = new JsonObject().With("name", Name);
            if (Title != null) item["title"] = Title;
            if (Description != null) item["description"] = Description;
            if (Arguments.Count > 0)
            {
                var list = new List<object>();
                foreach (var argument in Arguments)
                {
                    var a = new JsonObject().With("name", argument.Name);
                    if (argument.Description != null) a["description"] = argument.Description;
                    if (argument.Required) a["required"] = true;
                    list.Add(a);
                }
                item["arguments"] = list;
            }
            return item;
        }
    }

    /// <summary>A prompt's answer: its messages ({role, content}) and an optional description.</summary>
    public sealed class PromptResult
    {
        public string Description;
        public IList<JsonObject> Messages = new List<JsonObject>();

        public static JsonObject Message(string role, JsonObject content)
        {
            return new JsonObject().With("role", role).With("content", content);
        }
    }

    /// <summary>The user's answer to an elicitation (protocol.md section 13).</summary>
    public sealed class ElicitResult
    {
        /// <summary>accept, decline or cancel.</summary>
        public string Action;
        public JsonObject Content;
        /// <summary>Set when the user was not asked (elicitation_unsupported, elicitation_timeout, ...).</summary>
        public string ErrorCode;
        public string Error;
    }

    /// <summary>The call is not running any more (cancelled, past its deadline, or the link closed):
    /// no question was sent. Let it propagate; nothing is sent for the call.</summary>
    public sealed class CallNotRunningException : OperationCanceledException
    {
        public CallNotRunningException() : base("the call is not running any more (cancelled or past its deadline)") { }
    }

    /// <summary>A progress report (IProgress&lt;ProgressReport&gt; on ToolContext).</summary>
    public struct ProgressReport
    {
        public double Progress;
        public double? Total;
        public string Message;

        public ProgressReport(double progress, double? total = null, string message = null)
        {
            Progress = progress;
            Total = total;
            Message = message;
        }
    }

    /// <summary>Something went wrong on the link that the app may want to log (never thrown at the host app).</summary>
    public sealed class ProtocolErrorEventArgs : EventArgs
    {
        public ProtocolErrorEventArgs(string code, string message, Exception exception = null)
        {
            Code = code;
            Message = message;
            Exception = exception;
        }

        public string Code { get; private set; }
        public string Message { get; private set; }
        public Exception Exception { get; private set; }
    }
}
