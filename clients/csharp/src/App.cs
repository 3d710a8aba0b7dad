// The app: what it offers (tools, resources, templates, prompts) and the connection loop that
// keeps it registered with the daemon (discover, connect, register, serve; on a lost link
// reconnect with backoff and the same instanceId; stop for good on a final refusal; goodbye when
// the app stops). Nothing here throws at the host app from a background thread: problems on the
// link are ProtocolError events, a handler's exception is a HandlerFailed event.
using System;
using System.Collections.Generic;
using System.Text.RegularExpressions;
using System.Threading;
using System.Threading.Tasks;

namespace Toolbridge
{
    public sealed class AppOptions
    {
        /// <summary>Stable identity of this running copy; default: a UUID made once per process.</summary>
        public string InstanceId;
        /// <summary>How many calls run at once (the broker queues the rest).</summary>
        public int MaxConcurrency = 1;
        public string AppVersion;
        /// <summary>Where to find the daemon (home, host, port, token, TLS CA); default: the environment and home directory.</summary>
        public DiscoveryOptions Discovery = new DiscoveryOptions();
        /// <summary>Run handlers (and raise events) on this context: a GUI thread's (WinForms, WPF, Avalonia)
        /// or a Unity main-thread pump. The socket is read on a background thread either way, so pings are
        /// answered while the UI thread is busy.</summary>
        public SynchronizationContext SynchronizationContext;
        /// <summary>Register with protocol version 2 even without resources or prompts (for log messages and elicitation).</summary>
        public bool ProtocolVersion2;
    }

    public sealed class RegisteredEventArgs : EventArgs
    {
        public string AppLabel;
        public IDictionary<string, string> ToolNames = new Dictionary<string, string>();
        public int ProtocolVersion;
    }

    public sealed class HandlerFailedEventArgs : EventArgs
    {
        public string What;
        public Exception Exception;
    }

    public sealed partial class App
    {
        private static readonly string ProcessInstanceId = Guid.NewGuid().ToString();

        private readonly object _lock = new object();
        private readonly List<ToolDefinition> _tools = new List<ToolDefinition>();
        private readonly List<ResourceDefinition> _resources = new List<ResourceDefinition>();
        private readonly List<TemplateDefinition> _templates = new List<TemplateDefinition>();
        private readonly List<PromptDefinition> _prompts = new List<PromptDefinition>();
        private readonly AppOptions _options;
        private Session _session;

        public App(string name, AppOptions options = null)
        {
            if (string.IsNullOrEmpty(name)) throw new ArgumentException("an app needs a name", "name");
            Name = name;
            _options = options ?? new AppOptions();
            InstanceId = string.IsNullOrEmpty(_options.InstanceId) ? ProcessInstanceId : _options.InstanceId;
        }

        public string Name { get; private set; }
        public string InstanceId { get; private set; }

        /// <summary>A problem on the link (bad line, refusal, lost daemon). Never thrown.</summary>
        public event EventHandler<ProtocolErrorEventArgs> ProtocolError;
        /// <summary>A handler threw something other than ToolError (the agent saw a masked message).</summary>
        public event EventHandler<HandlerFailedEventArgs> HandlerFailed;
        public event EventHandler<RegisteredEventArgs> Registered;
        public event EventHandler Disconnected;

        // ---- declaring ----

        /// <summary>Add a tool with an explicit JSON Schema (a string, checked now).</summary>
        public ToolDefinition AddTool(string name, string description, string inputSchema, ToolHandler handler, string outputSchema = null)
        {
            var tool = new ToolDefinition
            {
                Name = name,
                Description = description,
                InputSchema = inputSchema == null ? null : new JsonRaw(inputSchema),
                OutputSchema = outputSchema == null ? null : new JsonRaw(outputSchema),
                Handler = handler,
            };
            return AddTool(tool);
        }

        public ToolDefinition AddTool(ToolDefinition tool)
        {
            if (tool.Handler == null) throw new ArgumentException("the tool '" + tool.Name + "' has no handler");
            // Checked on a copy, so a later change to the caller's array cannot send what was not checked.
            if (tool.ExampleRequests != null) tool.ExampleRequests = (string[])tool.ExampleRequests.Clone();
            tool.CheckExampleRequests();
            lock (_lock)
            {
                if (_tools.Exists(t => t.Name == tool.Name)) throw new ArgumentException("a tool named '" + tool.Name + "' exists already");
                _tools.Add(tool);
            }
            SendToolUpdate(new JsonObject().With("type", "addTools").With("tools", new List<object> { tool.ToJson() }));
            return tool;
        }

        /// <summary>Add every [Tool] method of an object (static ones too).</summary>
        public IList<ToolDefinition> AddTools(object target)
        {
            var tools = Reflection.ToolsOf(target.GetType(), target);
            foreach (var tool in tools) AddTool(tool);
            return tools;
        }

        /// <summary>Add every static [Tool] method of a type.</summary>
        public IList<ToolDefinition> AddTools(Type type)
        {
            var tools = Reflection.ToolsOf(type, null);
            foreach (var tool in tools) AddTool(tool);
            return tools;
        }

        /// <summary>Add every [Tool], [Resource] and [Prompt] method of an object (static ones too).</summary>
        public void AddFrom(object target)
        {
            AddTools(target);
            var resources = new List<ResourceDefinition>();
            var templates = new List<TemplateDefinition>();
            Reflection.ResourcesOf(target.GetType(), target, resources, templates);
            foreach (var resource in resources) AddResource(resource.Uri, resource.Name, resource.Read, resource.MimeType, resource.Description);
            foreach (var template in templates) AddResourceTemplate(template.UriTemplate, template.Name, template.Read, template.MimeType, template.Description);
            foreach (var prompt in Reflection.PromptsOf(target.GetType(), target))
                AddPrompt(prompt.Name, prompt.Description, prompt.Render, new List<PromptArgument>(prompt.Arguments).ToArray());
        }

        public bool RemoveTool(string name)
        {
            lock (_lock)
            {
                if (_tools.RemoveAll(t => t.Name == name) == 0) return false;
            }
            SendToolUpdate(new JsonObject().With("type", "removeTools").With("names", new List<object> { name }));
            return true;
        }

        public ResourceDefinition AddResource(string uri, string name, ResourceReader read, string mimeType = null, string description = null)
        {
            var resource = new ResourceDefinition { Uri = uri, Name = name, Read = read, MimeType = mimeType, Description = description };
            lock (_lock)
            {
                _resources.RemoveAll(r => r.Uri == uri);
                _resources.Add(resource);
            }
            SendResources();
            return resource;
        }

        public bool RemoveResource(string uri)
        {
            lock (_lock)
            {
                if (_resources.RemoveAll(r => r.Uri == uri) == 0) return false;
            }
            SendResources();
            return true;
        }

        public TemplateDefinition AddResourceTemplate(string uriTemplate, string name, TemplateReader read, string mimeType = null, string description = null)
        {
            var template = new TemplateDefinition { UriTemplate = uriTemplate, Name = name, Read = read, MimeType = mimeType, Description = description };
            TemplateMatcher(uriTemplate); // refuse a malformed template now
            lock (_lock)
            {
                _templates.RemoveAll(t => t.UriTemplate == uriTemplate);
                _templates.Add(template);
            }
            SendResources();
            return template;
        }

        public PromptDefinition AddPrompt(string name, string description, PromptRenderer render, params PromptArgument[] arguments)
        {
            var prompt = new PromptDefinition { Name = name, Description = description, Render = render, Arguments = new List<PromptArgument>(arguments) };
            lock (_lock)
            {
                _prompts.RemoveAll(p => p.Name == name);
                _prompts.Add(prompt);
            }
            SendPrompts();
            return prompt;
        }

        public bool RemovePrompt(string name)
        {
            lock (_lock)
            {
                if (_prompts.RemoveAll(p => p.Name == name) == 0) return false;
            }
            SendPrompts();
            return true;
        }

        /// <summary>Completion from a fixed list: the options that start with the value, ignoring case.</summary>
        public static Completer Options(params string[] options)
        {
            return (value, arguments, cancel) =>
            {
                var values = new List<string>();
                foreach (var option in options)
                    if (option.StartsWith(value ?? "", StringComparison.OrdinalIgnoreCase)) values.Add(option);
                return Task.FromResult(new Completion { Values = values, Total = values.Count, HasMore = false });
            };
        }

        /// <summary>Tell agents that subscribed that a resource changed (version 2).</summary>
        public void ResourceUpdated(string uri)
        {
            Session session;
            lock (_lock) { session = _session; }
            if (session != null && session.Registered && session.Version >= 2)
                session.Send(new JsonObject().With("type", "resourceUpdated").With("uri", uri));
        }

        /// <summary>An app-wide log message for agents (version 2; level: debug, info, notice, warning, error, ...).</summary>
        public void Log(string level, object data, string logger = null)
        {
            Session session;
            lock (_lock) { session = _session; }
            if (session == null || !session.Registered) return;
            var message = session.LogMessage(level, data, logger);
            if (message != null) session.Send(message);
        }

        // ---- what the session asks ----

        /// <summary>Queue the register on the session, and from now on send it the declarations' changes
        /// as updates: both under the lock, so no change is lost between them. Returns the version offered.</summary>
        internal int SendRegister(string token, Session session)
        {
            lock (_lock)
            {
                var register = BuildRegister(token);
                _session = session;
                _pendingUpdates.Clear();
                _resourcesChanged = _promptsChanged = false;
                session.Send(register);
                return (int)(long)register["protocolVersion"];
            }
        }

        internal JsonObject BuildRegister(string token)
        {
            lock (_lock)
            {
                var tools = new List<object>();
                foreach (var tool in _tools) tools.Add(tool.ToJson());
                var version2 = _options.ProtocolVersion2 || _resources.Count > 0 || _templates.Count > 0 || _prompts.Count > 0;
                var register = new JsonObject().With("type", "register").With("appName", Name).With("token", token)
                    .With("instanceId", InstanceId).With("protocolVersion", version2 ? 2L : 1L)
                    .With("maxConcurrency", Math.Max(1, _options.MaxConcurrency)).With("tools", tools);
                if (_options.AppVersion != null) register["appVersion"] = _options.AppVersion;
                if (version2)
                {
                    AddV2Declarations(register);
                    if (HasCompletions()) register["completions"] = true;
                }
                return register;
            }
        }

        private void AddV2Declarations(JsonObject message)
        {
            var resources = new List<object>();
            foreach (var resource in _resources) resources.Add(resource.ToJson());
            var templates = new List<object>();
            foreach (var template in _templates) templates.Add(template.ToJson());
            message["resources"] = resources;
            message["resourceTemplates"] = templates;
            var prompts = new List<object>();
            foreach (var prompt in _prompts) prompts.Add(prompt.ToJson());
            message["prompts"] = prompts;
        }

        private bool HasCompletions()
        {
            foreach (var template in _templates) if (template.Complete.Count > 0) return true;
            foreach (var prompt in _prompts) if (prompt.Complete.Count > 0) return true;
            return false;
        }

        internal ToolDefinition FindTool(string name)
        {
            lock (_lock) { return _tools.Find(t => t.Name == name); }
        }

        internal PromptDefinition FindPrompt(string name)
        {
            lock (_lock) { return _prompts.Find(p => p.Name == name); }
        }

        internal Func<Task<object>> FindReader(string uri, RequestContext context, out string mimeType)
        {
            lock (_lock)
            {
                var resource = _resources.Find(r => r.Uri == uri);
                if (resource != null)
                {
                    mimeType = resource.MimeType;
                    return () => resource.Read(context);
                }
                foreach (var template in _templates)
                {
                    var variables = MatchTemplate(template.UriTemplate, uri);
                    if (variables == null) continue;
                    mimeType = template.MimeType;
                    var chosen = template;
                    return () => chosen.Read(variables, context);
                }
            }
            mimeType = null;
            return null;
        }

        internal Completer FindCompleter(string prompt, string uriTemplate, string argument, out string missing)
        {
            missing = null;
            Completer completer;
            lock (_lock)
            {
                if (prompt != null)
                {
                    var found = _prompts.Find(p => p.Name == prompt);
                    if (found == null) { missing = "no prompt '" + prompt + "'"; return null; }
                    return found.Complete.TryGetValue(argument, out completer) ? completer : null;
                }
                var template = _templates.Find(t => t.UriTemplate == uriTemplate);
                if (template == null) { missing = "no resource template '" + uriTemplate + "'"; return null; }
                return template.Complete.TryGetValue(argument, out completer) ? completer : null;
            }
        }

        /// <summary>RFC 6570 level 1: the variables of a URI that matches the template (percent-decoded), or null.</summary>
        public static IDictionary<string, string> MatchTemplate(string uriTemplate, string uri)
        {
            List<string> names;
            var match = TemplateMatcher(uriTemplate, out names).Match(uri);
            if (!match.Success) return null;
            var variables = new Dictionary<string, string>();
            for (var i = 0; i < names.Count; i++) variables[names[i]] = Uri.UnescapeDataString(match.Groups[i + 1].Value);
            return variables;
        }

        private static Regex TemplateMatcher(string uriTemplate)
        {
            List<string> names;
            return TemplateMatcher(uriTemplate, out names);
        }

        private static Regex TemplateMatcher(string uriTemplate, out List<string> names)
        {
            names = new List<string>();
            var pattern = new System.Text.StringBuilder("^");
            var at = 0;
            while (at < uriTemplate.Length)
            {
                var open = uriTemplate.IndexOf('{', at);
                if (open < 0) { pattern.Append(Regex.Escape(uriTemplate.Substring(at))); break; }
                var close = uriTemplate.IndexOf('}', open);
                if (close < 0) throw new ArgumentException("unclosed '{' in the template '" + uriTemplate + "'");
                pattern.Append(Regex.Escape(uriTemplate.Substring(at, open - at)));
                names.Add(uriTemplate.Substring(open + 1, close - open - 1));
                pattern.Append("([^/?#]+)");
                at = close + 1;
            }
            return new Regex(pattern.Append('$').ToString(), RegexOptions.CultureInvariant);
        }

        internal Task<T> Dispatch<T>(Func<Task<T>> work)
        {
            var context = _options.SynchronizationContext;
            if (context == null) return Task.Run(work);
            var done = new TaskCompletionSource<T>(TaskCreationOptions.RunContinuationsAsynchronously);
            context.Post(_ =>
            {
                try
                {
                    // Awaits inside the handler come back to this context (the UI thread); the UI thread
                    // never waits on the daemon: the answer is sent from the continuation below.
                    work().ContinueWith(t =>
                    {
                        if (t.IsCanceled) done.TrySetCanceled();
                        else if (t.IsFaulted) done.TrySetException(t.Exception.InnerExceptions);
                        else done.TrySetResult(t.Result);
                    }, TaskContinuationOptions.ExecuteSynchronously);
                }
                catch (Exception exc) { done.TrySetException(exc); }
            }, null);
            return done.Task;
        }
    }
}
