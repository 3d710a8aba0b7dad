// What a handler gets besides its arguments: the call's CancellationToken (fires on toolCancel
// and at the deadline), progress, log messages tied to the call, and elicitation.
using System;
using System.Collections.Generic;
using System.Threading;
using System.Threading.Tasks;

namespace Toolbridge
{
    /// <summary>The context of one request from the broker (a tool call, a read, a prompt get, a completion).</summary>
    public class RequestContext
    {
        internal readonly Session Session;
        internal readonly CallState Call;

        internal RequestContext(Session session, CallState call)
        {
            Session = session;
            Call = call;
        }

        /// <summary>Fires when the broker cancels the request or its deadline passes.</summary>
        public CancellationToken CancellationToken { get { return Call.Cancel.Token; } }

        public long CorrelationId { get { return Call.Id; } }

        /// <summary>The URI read (resource reads only).</summary>
        public string Uri { get; internal set; }

        /// <summary>A log message tied to this call (protocol.md section 12; version 2 only, else dropped).</summary>
        public void Log(string level, object data, string logger = null)
        {
            var message = Session.LogMessage(level, data, logger);
            if (message == null) return;
            message["correlationId"] = Call.Id;
            Session.SendForCall(Call, message);
        }
    }

    /// <summary>The context of a tool call.</summary>
    public sealed class ToolContext : RequestContext, IProgress<ProgressReport>
    {
        internal ToolContext(Session session, CallState call, bool progressRequested) : base(session, call)
        {
            ProgressRequested = progressRequested;
        }

        public string ToolName { get; internal set; }

        /// <summary>The agent asked for progress (reports are sent only then).</summary>
        public bool ProgressRequested { get; private set; }

        /// <summary>This context as an IProgress (for APIs that take one).</summary>
        public IProgress<ProgressReport> Progress { get { return this; } }

        /// <summary>Report progress (it must increase); sent only when the agent asked for it and the call runs.</summary>
        public void ReportProgress(double progress, double? total = null, string message = null)
        {
            if (!ProgressRequested) return;
            var line = new JsonObject().With("type", "toolProgress").With("correlationId", Call.Id).With("progress", progress);
            if (total.HasValue) line["total"] = total.Value;
            if (message != null) line["message"] = message;
            Session.SendForCall(Call, line);
        }

        void IProgress<ProgressReport>.Report(ProgressReport value)
        {
            ReportProgress(value.Progress, value.Total, value.Message);
        }

        /// <summary>Ask the user to fill in a form (requestedSchema: MCP's restricted schema).
        /// Throws CallNotRunningException when the call was cancelled before or while asking.</summary>
        public Task<ElicitResult> ElicitAsync(string message, object requestedSchema)
        {
            var line = new JsonObject().With("type", "elicit").With("correlationId", Call.Id).With("message", message)
                .With("requestedSchema", requestedSchema);
            return Session.ElicitAsync(Call, line);
        }

        /// <summary>Send the user to a URL (sign-ins, payments: never ask for secrets in a form).</summary>
        public Task<ElicitResult> ElicitUrlAsync(string message, string url)
        {
            var line = new JsonObject().With("type", "elicit").With("correlationId", Call.Id).With("mode", "url")
                .With("message", message).With("url", url);
            return Session.ElicitAsync(Call, line);
        }
    }

    /// <summary>One request in flight: removed exactly once (answer, cancel, deadline or link end).</summary>
    internal sealed class CallState
    {
        public long Id;
        public string Kind; // toolResponse, resourceResponse, promptResponse, completeResponse
        public string What; // the tool, URI or prompt, for messages
        public readonly CancellationTokenSource Cancel = new CancellationTokenSource();
        public IDisposable Deadline;
        public int NextElicitId;
        public readonly Dictionary<long, TaskCompletionSource<ElicitResult>> Elicits = new Dictionary<long, TaskCompletionSource<ElicitResult>>();
    }
}
