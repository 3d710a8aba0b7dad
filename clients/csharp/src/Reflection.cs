// Tools from attributed methods: [Tool("Echo the text")] public string Echo([Description("the text")] string text).
//
// The input schema comes from the parameters' types: strings, integers, numbers, booleans, enums
// (their names), arrays and lists (items), nested classes (their public fields and properties);
// a parameter with a default value or of a Nullable type is optional (the default is in the
// schema); ToolContext and CancellationToken parameters are filled in by the library. The
// arguments are converted back to those types when the tool is called (a value that does not
// convert is an invalid_arguments ToolError). Task and Task<T> handlers are awaited; the value
// returned becomes the result's data (a ToolResult is sent as it is).
using System;
using System.Collections;
using System.Collections.Generic;
using System.ComponentModel;
using System.Globalization;
using System.Reflection;
using System.Threading;
using System.Threading.Tasks;

namespace Toolbridge
{
    /// <summary>Marks a method as a tool; the description is what the model reads.</summary>
    [AttributeUsage(AttributeTargets.Method)]
    public sealed class ToolAttribute : Attribute
    {
        public ToolAttribute(string description = "") { Description = description; }

        public string Description { get; private set; }
        /// <summary>The tool's name (default: the method's name).</summary>
        public string Name { get; set; }
        public string Title { get; set; }
        /// <summary>Default deadline in ms (0: the broker's default).</summary>
        public int TimeoutMs { get; set; }
        /// <summary>false for tools that take free text (see protocol.md, pathGuard).</summary>
        public bool PathGuard { get; set; } = true;
        /// <summary>Typical requests a user would make that this tool serves, for the daemon's tool search
        /// only (agents never see them): at most 16, each 1-200 characters (see protocol.md, exampleRequests).</summary>
        public string[] ExampleRequests { get; set; }
        /// <summary>The JSON Schema of the structured result, as a string.</summary>
        public string OutputSchema { get; set; }
        public bool ReadOnly { get; set; }
        public bool Destructive { get; set; }
        public bool Idempotent { get; set; }
        public bool OpenWorld { get; set; }
    }

    /// <summary>Marks a method as a prompt: its string parameters are the prompt's arguments (required
    /// unless they have a default); it returns a string (one user message), a PromptResult or messages.</summary>
    [AttributeUsage(AttributeTargets.Method)]
    public sealed class PromptAttribute : Attribute
    {
        public PromptAttribute(string description = null) { Description = description; }

        public string Description { get; private set; }
        public string Name { get; set; }
    }

    /// <summary>Marks a method as a resource (a URI without variables; no parameters) or a resource
    /// template (a URI with {variables}: string parameters of the same names); it returns a string
    /// (text), byte[] (a blob) or ResourceContents.</summary>
    [AttributeUsage(AttributeTargets.Method)]
    public sealed class ResourceAttribute : Attribute
    {
        public ResourceAttribute(string uri) { Uri = uri; }

        public string Uri { get; private set; }
        public string Name { get; set; }
        public string MimeType { get; set; }
        public string Description { get; set; }
    }

    public static class Reflection
    {
        public static List<ToolDefinition> ToolsOf(Type type, object target)
        {
            var flags = BindingFlags.Public | BindingFlags.Static | (target != null ? BindingFlags.Instance : 0);
            var tools = new List<ToolDefinition>();
            foreach (var method in type.GetMethods(flags))
            {
                var attribute = method.GetCustomAttribute<ToolAttribute>();
                if (attribute != null) tools.Add(ToolOf(method, method.IsStatic ? null : target, attribute));
            }
            return tools;
        }

        public static ToolDefinition ToolOf(MethodInfo method, object target, ToolAttribute attribute)
        {
            var description = attribute.Description;
            if (string.IsNullOrEmpty(description))
            {
                var described = method.GetCustomAttribute<DescriptionAttribute>();
                description = described != null ? described.Description : "";
            }
            var parameters = method.GetParameters();
            var tool = new ToolDefinition
            {
                Name = attribute.Name ?? method.Name,
                Description = description,
                Title = attribute.Title,
                InputSchema = InputSchema(parameters),
                OutputSchema = attribute.OutputSchema == null ? null : new JsonRaw(attribute.OutputSchema),
                TimeoutMs = attribute.TimeoutMs > 0 ? (int?)attribute.TimeoutMs : null,
                PathGuard = attribute.PathGuard ? (bool?)null : false,
                ExampleRequests = attribute.ExampleRequests,
            };
            if (attribute.ReadOnly || attribute.Destructive || attribute.Idempotent || attribute.OpenWorld)
            {
                tool.Annotations = new JsonObject();
                if (attribute.ReadOnly) tool.Annotations["readOnlyHint"] = true;
                if (attribute.Destructive) tool.Annotations["destructiveHint"] = true;
                if (attribute.Idempotent) tool.Annotations["idempotentHint"] = true;
                if (attribute.OpenWorld) tool.Annotations["openWorldHint"] = true;
            }
            tool.Handler = (arguments, context) => Invoke(method, target, parameters, arguments, context);
            return tool;
        }

        /// <summary>The [Prompt] methods of a type (instance ones on target).</summary>
        public static List<PromptDefinition> PromptsOf(Type type, object target)
        {
            var prompts = new List<PromptDefinition>();
            foreach (var method in type.GetMethods(BindingFlags.Public | BindingFlags.Static | (target != null ? BindingFlags.Instance : 0)))
            {
                var attribute = method.GetCustomAttribute<PromptAttribute>();
                if (attribute == null) continue;
                var parameters = method.GetParameters();
                var prompt = new PromptDefinition { Name = attribute.Name ?? method.Name, Description = attribute.Description ?? DescriptionOf(method) };
                foreach (var parameter in parameters)
                {
                    if (RequestInjected(parameter.ParameterType)) continue;
                    if (parameter.ParameterType != typeof(string)) throw new ArgumentException("the prompt " + prompt.Name + "'s argument '" + parameter.Name + "' is not a string (prompt arguments are strings)");
                    var described = parameter.GetCustomAttribute<DescriptionAttribute>();
                    prompt.Arguments.Add(new PromptArgument { Name = parameter.Name, Required = !parameter.HasDefaultValue, Description = described != null ? described.Description : null });
                }
                var bound = method.IsStatic ? null : target;
                prompt.Render = (arguments, context) => Call(method, bound, StringArguments(parameters, arguments, context));
                prompts.Add(prompt);
            }
            return prompts;
        }

        /// <summary>The [Resource] methods of a type: resources, and templates for URIs with {variables}.</summary>
        public static void ResourcesOf(Type type, object target, List<ResourceDefinition> resources, List<TemplateDefinition> templates)
        {
            foreach (var method in type.GetMethods(BindingFlags.Public | BindingFlags.Static | (target != null ? BindingFlags.Instance : 0)))
            {
                var attribute = method.GetCustomAttribute<ResourceAttribute>();
                if (attribute == null) continue;
                var parameters = method.GetParameters();
                var bound = method.IsStatic ? null : target;
                var description = attribute.Description ?? DescriptionOf(method);
                if (attribute.Uri.IndexOf('{') < 0)
                    resources.Add(new ResourceDefinition
                    {
                        Uri = attribute.Uri, Name = attribute.Name ?? method.Name, MimeType = attribute.MimeType, Description = description,
                        Read = context => Call(method, bound, StringArguments(parameters, new Dictionary<string, string>(), context)),
                    });
                else
                    templates.Add(new TemplateDefinition
                    {
                        UriTemplate = attribute.Uri, Name = attribute.Name ?? method.Name, MimeType = attribute.MimeType, Description = description,
                        Read = (variables, context) => Call(method, bound, StringArguments(parameters, variables, context)),
                    });
            }
        }

        private static string DescriptionOf(MemberInfo member)
        {
            var described = member.GetCustomAttribute<DescriptionAttribute>();
            return described != null ? described.Description : null;
        }

        private static bool RequestInjected(Type type)
        {
            return type == typeof(RequestContext) || type == typeof(CancellationToken);
        }

        private static object[] StringArguments(ParameterInfo[] parameters, IDictionary<string, string> arguments, RequestContext context)
        {
            var values = new object[parameters.Length];
            for (var i = 0; i < parameters.Length; i++)
            {
                var parameter = parameters[i];
                string value;
                if (parameter.ParameterType == typeof(RequestContext)) values[i] = context;
                else if (parameter.ParameterType == typeof(CancellationToken)) values[i] = context.CancellationToken;
                else if (arguments.TryGetValue(parameter.Name, out value)) values[i] = value;
                else if (parameter.HasDefaultValue) values[i] = parameter.DefaultValue;
                else throw new ToolError("the argument '" + parameter.Name + "' is missing", "invalid_arguments");
            }
            return values;
        }

        private static bool Injected(Type type)
        {
            return type == typeof(ToolContext) || type == typeof(CancellationToken) || type == typeof(IProgress<ProgressReport>);
        }

        public static JsonObject InputSchema(ParameterInfo[] parameters)
        {
            var properties = new JsonObject();
            var required = new List<object>();
            foreach (var parameter in parameters)
            {
                if (Injected(parameter.ParameterType)) continue;
                var schema = SchemaOf(parameter.ParameterType, 0);
                var described = parameter.GetCustomAttribute<DescriptionAttribute>();
                if (described != null) schema["description"] = described.Description;
                if (parameter.HasDefaultValue)
                {
                    if (parameter.DefaultValue != null) schema["default"] = ToJsonValue(parameter.DefaultValue);
                }
                else if (Nullable.GetUnderlyingType(parameter.ParameterType) == null) required.Add(parameter.Name);
                properties[parameter.Name] = schema;
            }
            var root = new JsonObject().With("type", "object").With("properties", properties);
            if (required.Count > 0) root["required"] = required;
            root["additionalProperties"] = false;
            return root;
        }

        /// <summary>The JSON Schema of a CLR type (see the file's header).</summary>
        public static JsonObject SchemaOf(Type type, int depth)
        {
            if (depth > 16) throw new ArgumentException("the type " + type.Name + " nests too deeply for a tool schema");
            var underlying = Nullable.GetUnderlyingType(type);
            if (underlying != null) type = underlying;
            if (type == typeof(string) || type == typeof(char) || type == typeof(Guid)) return new JsonObject().With("type", "string");
            if (type == typeof(DateTime) || type == typeof(DateTimeOffset)) return new JsonObject().With("type", "string").With("format", "date-time");
            if (type == typeof(bool)) return new JsonObject().With("type", "boolean");
            if (type == typeof(int) || type == typeof(long) || type == typeof(short) || type == typeof(byte)
                || type == typeof(uint) || type == typeof(ulong) || type == typeof(ushort) || type == typeof(sbyte))
                return new JsonObject().With("type", "integer");
            if (type == typeof(double) || type == typeof(float) || type == typeof(decimal)) return new JsonObject().With("type", "number");
            if (type.IsEnum) return new JsonObject().With("type", "string").With("enum", new List<object>(Enum.GetNames(type)));
            if (type == typeof(JsonObject)) return new JsonObject().With("type", "object");
            if (type == typeof(object)) return new JsonObject();
            var element = ElementType(type);
            if (element != null) return new JsonObject().With("type", "array").With("items", SchemaOf(element, depth + 1));
            var properties = new JsonObject();
            var required = new List<object>();
            foreach (var member in Members(type))
            {
                var memberType = MemberType(member);
                var schema = SchemaOf(memberType, depth + 1);
                var described = member.GetCustomAttribute<DescriptionAttribute>();
                if (described != null) schema["description"] = described.Description;
                properties[member.Name] = schema;
                if (memberType.IsValueType && Nullable.GetUnderlyingType(memberType) == null) required.Add(member.Name);
            }
            var obj = new JsonObject().With("type", "object").With("properties", properties);
            if (required.Count > 0) obj["required"] = required;
            return obj;
        }

        private static Type ElementType(Type type)
        {
            if (type.IsArray) return type.GetElementType();
            if (type.IsGenericType)
            {
                var definition = type.GetGenericTypeDefinition();
                if (definition == typeof(List<>) || definition == typeof(IList<>) || definition == typeof(IEnumerable<>)
                    || definition == typeof(ICollection<>) || definition == typeof(IReadOnlyList<>))
                    return type.GetGenericArguments()[0];
            }
            return null;
        }

        private static IEnumerable<MemberInfo> Members(Type type)
        {
            foreach (var field in type.GetFields(BindingFlags.Public | BindingFlags.Instance)) yield return field;
            foreach (var property in type.GetProperties(BindingFlags.Public | BindingFlags.Instance))
                if (property.CanRead && property.GetIndexParameters().Length == 0) yield return property;
        }

        private static Type MemberType(MemberInfo member)
        {
            var field = member as FieldInfo;
            return field != null ? field.FieldType : ((PropertyInfo)member).PropertyType;
        }

        // ---- calling ----

        private static async Task<object> Invoke(MethodInfo method, object target, ParameterInfo[] parameters, JsonObject arguments, ToolContext context)
        {
            var values = new object[parameters.Length];
            for (var i = 0; i < parameters.Length; i++)
            {
                var parameter = parameters[i];
                var type = parameter.ParameterType;
                if (type == typeof(ToolContext)) values[i] = context;
                else if (type == typeof(CancellationToken)) values[i] = context.CancellationToken;
                else if (type == typeof(IProgress<ProgressReport>)) values[i] = context.Progress;
                else
                {
                    object value;
                    if (arguments.TryGetValue(parameter.Name, out value)) values[i] = Convert(value, type, parameter.Name);
                    else if (parameter.HasDefaultValue) values[i] = parameter.DefaultValue;
                    else if (!type.IsValueType || Nullable.GetUnderlyingType(type) != null) values[i] = null;
                    else throw new ToolError("the argument '" + parameter.Name + "' is missing", "invalid_arguments");
                }
            }
            return await Call(method, target, values).ConfigureAwait(false);
        }

        /// <summary>Call a method and await it when it returns a Task (its value, or null for Task and void).</summary>
        private static async Task<object> Call(MethodInfo method, object target, object[] values)
        {
            object returned;
            try { returned = method.Invoke(target, values); }
            catch (TargetInvocationException exc) { throw Unwrap(exc); }
            var task = returned as Task;
            if (task == null) return returned;
            await task.ConfigureAwait(false);
            var taskType = task.GetType();
            if (!taskType.IsGenericType) return null;
            var result = taskType.GetProperty("Result").GetValue(task);
            return result != null && result.GetType().FullName == "System.Threading.Tasks.VoidTaskResult" ? null : result;
        }

        private static Exception Unwrap(TargetInvocationException exc)
        {
            var inner = exc.InnerException ?? exc;
            System.Runtime.ExceptionServices.ExceptionDispatchInfo.Capture(inner).Throw();
            return inner;
        }

        /// <summary>A JSON value converted to a CLR type (ToolError invalid_arguments when it does not fit).</summary>
        public static object Convert(object value, Type type, string name)
        {
            var underlying = Nullable.GetUnderlyingType(type);
            if (value == null)
            {
                if (!type.IsValueType || underlying != null) return null;
                throw new ToolError("the argument '" + name + "' may not be null", "invalid_arguments");
            }
            if (underlying != null) type = underlying;
            try
            {
                if (type == typeof(object) || type.IsInstanceOfType(value) && !(value is IList && type.IsArray)) return value;
                if (type == typeof(string)) return (string)value;
                if (type.IsEnum) return Enum.Parse(type, (string)value, false);
                if (type == typeof(bool)) return (bool)value;
                if (type == typeof(Guid)) return Guid.Parse((string)value);
                if (type == typeof(DateTime)) return DateTime.Parse((string)value, CultureInfo.InvariantCulture, DateTimeStyles.RoundtripKind);
                if (type.IsPrimitive || type == typeof(decimal))
                {
                    if (!(value is long || value is double)) throw new InvalidCastException();
                    return System.Convert.ChangeType(value, type, CultureInfo.InvariantCulture);
                }
                var element = ElementType(type);
                if (element != null)
                {
                    var items = (List<object>)value;
                    var list = (IList)Activator.CreateInstance(typeof(List<>).MakeGenericType(element));
                    for (var i = 0; i < items.Count; i++) list.Add(Convert(items[i], element, name + "[" + i + "]"));
                    if (!type.IsArray) return list;
                    var array = Array.CreateInstance(element, list.Count);
                    list.CopyTo(array, 0);
                    return array;
                }
                var fields = (JsonObject)value;
                var instance = Activator.CreateInstance(type);
                foreach (var member in Members(type))
                {
                    object raw;
                    if (!fields.TryGetValue(member.Name, out raw)) continue;
                    var converted = Convert(raw, MemberType(member), name + "." + member.Name);
                    var field = member as FieldInfo;
                    if (field != null) field.SetValue(instance, converted);
                    else if (((PropertyInfo)member).CanWrite) ((PropertyInfo)member).SetValue(instance, converted);
                }
                return instance;
            }
            catch (ToolError) { throw; }
            catch (Exception exc) when (exc is InvalidCastException || exc is FormatException || exc is OverflowException
                                        || exc is ArgumentException || exc is MissingMethodException)
            {
                throw new ToolError("the argument '" + name + "' is not a valid " + type.Name, "invalid_arguments");
            }
        }

        /// <summary>A handler's return value as the JSON value model (objects of other classes: their public members).</summary>
        public static object ToJsonValue(object value)
        {
            return ToJsonValue(value, 0);
        }

        private static object ToJsonValue(object value, int depth)
        {
            if (value == null || value is string || value is bool || value is JsonObject || value is JsonRaw || value is byte[]) return value;
            var type = value.GetType();
            if (type.IsPrimitive || value is decimal) return value;
            if (type.IsEnum) return value.ToString();
            if (value is DateTime) return ((DateTime)value).ToString("o", CultureInfo.InvariantCulture);
            if (value is Guid) return value.ToString();
            if (depth > Json.MaxDepth) throw new JsonException("a result nests deeper than " + Json.MaxDepth);
            var dictionary = value as IDictionary;
            if (dictionary != null)
            {
                var obj = new JsonObject();
                foreach (DictionaryEntry entry in dictionary) obj[System.Convert.ToString(entry.Key, CultureInfo.InvariantCulture)] = ToJsonValue(entry.Value, depth + 1);
                return obj;
            }
            var sequence = value as IEnumerable;
            if (sequence != null)
            {
                var list = new List<object>();
                foreach (var item in sequence) list.Add(ToJsonValue(item, depth + 1));
                return list;
            }
            var members = new JsonObject();
            foreach (var member in Members(type))
            {
                var field = member as FieldInfo;
                members[member.Name] = ToJsonValue(field != null ? field.GetValue(value) : ((PropertyInfo)member).GetValue(value), depth + 1);
            }
            return members;
        }
    }
}
