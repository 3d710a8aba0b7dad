// Finding the running daemon: host, port, token, Unix socket and TLS (as app_client.discovery
// and @toolbridge/app's discovery.ts).
//
// Each of host, port and token comes from the first source that has it: the options, then the
// environment (TOOLBRIDGE_HOST, TOOLBRIDGE_PORT, TOOLBRIDGE_TOKEN; empty and port 0 count as
// unset), then the home directory's files (runtime.json, token). The home is the option, else
// TOOLBRIDGE_HOME, else the per-user data directory. Files are read again on every attempt,
// so an app follows a daemon restarted on another port and a rotated token. Nothing falls back
// to a default port: without runtime.json and without a chosen port the daemon is "not found".
// When host and port both came from runtime.json and no TLS was asked for, the socket it names
// is tried first. runtime.json's "tls": true pins the daemon's own certificate (tlsCert);
// TOOLBRIDGE_TLS_CA (a CA file) or TOOLBRIDGE_TLS=1 (the system's trust store) verify as usual.
using System;
using System.Globalization;
using System.IO;
using System.Runtime.InteropServices;

namespace Toolbridge
{
    public sealed class DiscoveryOptions
    {
        public string Home;
        public string Host;
        public int? Port;
        public string Token;
        public string TlsCa;
        /// <summary>Reads an environment variable; tests pass their own.</summary>
        public Func<string, string> Environment = System.Environment.GetEnvironmentVariable;
    }

    /// <summary>Where the daemon listens and the token to present (ToString never shows the token).</summary>
    public sealed class DaemonAddress
    {
        public string Host;
        public int Port;
        public string Token;
        public string RuntimeFile;
        public bool Tls;
        public string TlsCa;
        public string TlsPin;
        public string Socket;

        public override string ToString()
        {
            return (Socket != null ? Socket + " or " : "") + Host + ":" + Port.ToString(CultureInfo.InvariantCulture) + (Tls ? " (TLS)" : "");
        }
    }

    /// <summary>The daemon is not running or not configured (not a reason to stop retrying).</summary>
    public sealed class DaemonNotFoundException : Exception
    {
        public DaemonNotFoundException(string message) : base(message) { }
    }

    public static class Discovery
    {
        public const string EnvHome = "TOOLBRIDGE_HOME";
        public const string EnvHost = "TOOLBRIDGE_HOST";
        public const string EnvPort = "TOOLBRIDGE_PORT";
        public const string EnvToken = "TOOLBRIDGE_TOKEN";
        public const string EnvTlsCa = "TOOLBRIDGE_TLS_CA";
        public const string EnvTls = "TOOLBRIDGE_TLS";
        public const string DefaultHost = "127.0.0.1";
        private const string StartHint = "start it with `toolbridge serve`";

        public static string DefaultHome(Func<string, string> env)
        {
            if (RuntimeInformation.IsOSPlatform(OSPlatform.Windows))
            {
                var local = env("LOCALAPPDATA");
                if (string.IsNullOrEmpty(local)) local = System.Environment.GetFolderPath(System.Environment.SpecialFolder.LocalApplicationData);
                return Path.Combine(local, "toolbridge");
            }
            var user = System.Environment.GetFolderPath(System.Environment.SpecialFolder.UserProfile);
            if (string.IsNullOrEmpty(user)) user = env("HOME") ?? "";
            if (RuntimeInformation.IsOSPlatform(OSPlatform.OSX))
                return Path.Combine(user, "Library", "Application Support", "toolbridge");
            var xdg = env("XDG_DATA_HOME");
            return Path.Combine(!string.IsNullOrEmpty(xdg) && xdg.StartsWith("/", StringComparison.Ordinal) ? xdg : Path.Combine(user, ".local", "share"), "toolbridge");
        }

        public static string ResolveHome(DiscoveryOptions options)
        {
            if (!string.IsNullOrEmpty(options.Home)) return options.Home;
            var home = options.Environment(EnvHome);
            return string.IsNullOrEmpty(home) ? DefaultHome(options.Environment) : home;
        }

        public static string ReadToken(string home)
        {
            var path = Path.Combine(home, "token");
            string token;
            try { token = File.ReadAllText(path).Trim(); }
            catch (FileNotFoundException) { throw new DaemonNotFoundException("no toolbridge token file at " + path + ": the daemon has never run with this home directory; " + StartHint + " (or set " + EnvToken + ")"); }
            catch (DirectoryNotFoundException) { throw new DaemonNotFoundException("no toolbridge token file at " + path + ": the daemon has never run with this home directory; " + StartHint + " (or set " + EnvToken + ")"); }
            catch (Exception exc) when (exc is IOException || exc is UnauthorizedAccessException) { throw new DaemonNotFoundException("cannot read the toolbridge token file " + path + ": " + exc.Message); }
            if (token.Length == 0) throw new DaemonNotFoundException("the toolbridge token file " + path + " is empty; " + StartHint);
            return token;
        }

        public static JsonObject ReadRuntime(string home)
        {
            var path = Path.Combine(home, "runtime.json");
            string raw;
            try { raw = File.ReadAllText(path); }
            catch (Exception exc) when (exc is FileNotFoundException || exc is DirectoryNotFoundException) { throw new DaemonNotFoundException("the toolbridge daemon is not running (no " + path + "); " + StartHint); }
            catch (Exception exc) when (exc is IOException || exc is UnauthorizedAccessException) { throw new DaemonNotFoundException("cannot read " + path + ": " + exc.Message); }
            JsonObject info;
            try { info = Json.Codec.Parse(raw) as JsonObject; }
            catch (JsonException exc) { throw new DaemonNotFoundException(path + " is not a valid toolbridge runtime file (" + exc.Message + "); " + StartHint); }
            if (info == null || !(info.Get("port") is long) || !(info.Get("host") is string))
                throw new DaemonNotFoundException(path + " is not a valid toolbridge runtime file (no host or port); " + StartHint);
            return info;
        }

        private static int ParsePort(string value, string source)
        {
            int port;
            if (!int.TryParse(value.Trim(), NumberStyles.None, CultureInfo.InvariantCulture, out port) || port <= 0 || port >= 65536)
                throw new DaemonNotFoundException(source + "=" + value + " is not a port number (1-65535)");
            return port;
        }

        /// <summary>Resolve the daemon's address and token (options, then environment, then home directory).</summary>
        public static DaemonAddress FindDaemon(DiscoveryOptions options)
        {
            var env = options.Environment;
            var home = ResolveHome(options);
            JsonObject runtime = null;
            int port;
            var envPort = env(EnvPort);
            if (options.Port.HasValue && options.Port.Value != 0) port = options.Port.Value;
            else if (!string.IsNullOrEmpty(envPort) && envPort.Trim() != "0") port = ParsePort(envPort, EnvPort);
            else
            {
                runtime = ReadRuntime(home);
                port = ParsePort(Convert.ToString(runtime["port"], CultureInfo.InvariantCulture), Path.Combine(home, "runtime.json"));
            }
            var chosenHost = !string.IsNullOrEmpty(options.Host) ? options.Host : (env(EnvHost) ?? "");
            var host = chosenHost.Length > 0 ? chosenHost : runtime != null ? (string)runtime["host"] : DefaultHost;
            var envToken = env(EnvToken);
            var token = !string.IsNullOrEmpty(options.Token) ? options.Token : !string.IsNullOrEmpty(envToken) ? envToken : ReadToken(home);
            var address = new DaemonAddress { Host = host, Port = port, Token = token };
            if (runtime != null) address.RuntimeFile = Path.Combine(home, "runtime.json");
            var ca = !string.IsNullOrEmpty(options.TlsCa) ? options.TlsCa : env(EnvTlsCa);
            if (!string.IsNullOrEmpty(ca))
            {
                address.Tls = true;
                address.TlsCa = ca;
                return address;
            }
            var tls = (env(EnvTls) ?? "").Trim().ToLowerInvariant();
            if (tls == "1" || tls == "true" || tls == "yes" || tls == "on")
            {
                address.Tls = true;
                return address;
            }
            if (runtime != null && runtime.Get("socket") is string && chosenHost.Length == 0) address.Socket = (string)runtime["socket"];
            if (runtime != null && true.Equals(runtime.Get("tls")))
            {
                address.Tls = true;
                address.TlsPin = runtime.Get("tlsCert") as string;
            }
            return address;
        }
    }
}
