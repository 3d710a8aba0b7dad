// The requests a broker sends an app (protocol.md sections 2, 11, 12): each is a call with a
// correlationId, answered exactly once through Session.Finish (or not at all after its cancel).
using System;
using System.Collections.Generic;
using System.Threading.Tasks;

namespace Toolbridge
{
    internal sealed partial class Session
    {
        private void OnInvocation(JsonObject message)
        {
            var id = Wire.Long(message, "correlationId");
            if (!id.HasValue) throw new ProtocolException("the field 'correlationId' is missing");
            var name = Wire.String(message, "tool", true);
            var arguments = Wire.Object(message, "parameters");
            var timeoutMs = Wire.Long(message, "timeoutMs");
            var progress = true.Equals(message.Get("progress"));
            var call = StartCall(id.Value, "toolResponse", name, timeoutMs);
            if (call == null) return;
            var tool = _app.FindTool(name);
            if (tool == null)
            {
                Finish(call, ErrorAnswer(call, "unknown tool '" + name + "': this app does not offer it (any more)", null));
                return;
            }
            var context = new ToolContext(this, call, progress) { ToolName = name };
            Run(call, async () =>
            {
                var value = await tool.Handler(arguments, context).ConfigureAwait(false);
                var result = value as ToolResult ?? new ToolResult { Data = Reflection.ToJsonValue(value) };
                return new JsonObject().With("type", "toolResponse").With("correlationId", call.Id).With("result", result.ToJson());
            });
        }

        private void OnResourceRead(JsonObject message)
        {
            var id = Wire.Long(message, "correlationId");
            if (!id.HasValue) throw new ProtocolException("the field 'correlationId' is missing");
            var uri = Wire.String(message, "uri", true);
            var call = StartCall(id.Value, "resourceResponse", uri, Wire.Long(message, "timeoutMs"));
            if (call == null) return;
            var context = new RequestContext(this, call) { Uri = uri };
            string mimeType;
            Func<Task<object>> read = _app.FindReader(uri, context, out mimeType);
            if (read == null)
            {
                Finish(call, ErrorAnswer(call, "no resource '" + uri + "': take URIs from the resource list", null));
                return;
            }
            Run(call, async () =>
            {
                var value = await read().ConfigureAwait(false);
                var contents = new List<object>();
                foreach (var item in Contents(value, uri, mimeType)) contents.Add(item.ToJson());
                return new JsonObject().With("type", "resourceResponse").With("correlationId", call.Id).With("contents", contents);
            });
        }

        private static IEnumerable<ResourceContents> Contents(object value, string uri, string mimeType)
        {
            var text = value as string;
            if (text != null) return new[] { new ResourceContents { Uri = uri, MimeType = mimeType, Text = text } };
            var bytes = value as byte[];
            if (bytes != null) return new[] { new ResourceContents { Uri = uri, MimeType = mimeType, Blob = bytes } };
            var one = value as ResourceContents;
            if (one != null) return new[] { one };
            var many = value as IEnumerable<ResourceContents>;
            if (many != null) return many;
            throw new InvalidOperationException("a resource reader returned " + (value == null ? "null" : value.GetType().Name) + "; return a string, byte[] or ResourceContents");
        }

        private void OnPromptGet(JsonObject message)
        {
            var id = Wire.Long(message, "correlationId");
            if (!id.HasValue) throw new ProtocolException("the field 'correlationId' is missing");
            var name = Wire.String(message, "name", true);
            var arguments = StringMap(Wire.Object(message, "arguments"));
            var call = StartCall(id.Value, "promptResponse", name, Wire.Long(message, "timeoutMs"));
            if (call == null) return;
            var prompt = _app.FindPrompt(name);
            if (prompt == null)
            {
                Finish(call, ErrorAnswer(call, "no prompt '" + name + "': take names from the prompt list", null));
                return;
            }
            var context = new RequestContext(this, call);
            Run(call, async () =>
            {
                var value = await prompt.Render(arguments, context).ConfigureAwait(false);
                var result = value as PromptResult;
                if (result == null)
                {
                    result = new PromptResult();
                    var text = value as string;
                    if (text != null) result.Messages.Add(PromptResult.Message("user", Content.Text(text)));
                    else if (value is IEnumerable<JsonObject>) result.Messages = new List<JsonObject>((IEnumerable<JsonObject>)value);
                    else throw new InvalidOperationException("a prompt returned " + (value == null ? "null" : value.GetType().Name) + "; return a string, a PromptResult or messages");
                }
                var answer = new JsonObject().With("type", "promptResponse").With("correlationId", call.Id);
                var description = result.Description ?? prompt.Description;
                if (description != null) answer["description"] = description;
                answer["messages"] = result.Messages;
                return answer;
            });
        }

        private void OnComplete(JsonObject message)
        {
            var id = Wire.Long(message, "correlationId");
            if (!id.HasValue) throw new ProtocolException("the field 'correlationId' is missing");
            var prompt = Wire.String(message, "prompt", false);
            var template = Wire.String(message, "uriTemplate", false);
            var argument = Wire.String(message, "argument", true);
            var value = Wire.String(message, "value", false) ?? "";
            var others = StringMap(Wire.Object(message, "arguments"));
            var call = StartCall(id.Value, "completeResponse", prompt ?? template ?? "completion", Wire.Long(message, "timeoutMs"));
            if (call == null) return;
            string missing;
            var completer = _app.FindCompleter(prompt, template, argument, out missing);
            if (missing != null)
            {
                Finish(call, ErrorAnswer(call, missing, null));
                return;
            }
            Run(call, async () =>
            {
                var completion = completer == null ? new Completion() : await completer(value, others, call.Cancel.Token).ConfigureAwait(false);
                var answer = new JsonObject().With("type", "completeResponse").With("correlationId", call.Id)
                    .With("values", completion.Values ?? new List<string>());
                if (completion.Total.HasValue) answer["total"] = completion.Total.Value;
                if (completion.HasMore.HasValue) answer["hasMore"] = completion.HasMore.Value;
                return answer;
            });
        }

        private static Dictionary<string, string> StringMap(JsonObject values)
        {
            var map = new Dictionary<string, string>();
            foreach (var pair in values)
            {
                var text = pair.Value as string;
                if (text == null) throw new ProtocolException("the argument '" + pair.Key + "' is not a string");
                map[pair.Key] = text;
            }
            return map;
        }
    }
}
