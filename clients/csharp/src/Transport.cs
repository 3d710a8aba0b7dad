// Opening the connection to the daemon: the Unix socket runtime.json names (where the runtime
// offers Unix sockets: .NET Core's UnixDomainSocketEndPoint or Mono's Mono.Unix.UnixEndPoint,
// found by reflection so the library stays on the .NET Standard 2.0 surface), else TCP; TLS with
// SslStream when the daemon speaks it (pinning its own certificate, or a CA file, or the system's
// trust store).
using System;
using System.IO;
using System.Net;
using System.Net.Security;
using System.Net.Sockets;
using System.Security.Authentication;
using System.Security.Cryptography.X509Certificates;
using System.Text;
using System.Threading;
using System.Threading.Tasks;

namespace Toolbridge
{
    public static class Transport
    {
        /// <summary>Open a stream to the daemon (the socket first when the address names one; TCP when that fails).</summary>
        public static async Task<Stream> ConnectAsync(DaemonAddress address, CancellationToken cancel)
        {
            if (address.Socket != null)
            {
                var endPoint = UnixEndPoint(address.Socket);
                if (endPoint != null)
                {
                    var unix = new Socket(AddressFamily.Unix, SocketType.Stream, ProtocolType.Unspecified);
                    try
                    {
                        await WithCancel(unix, Task.Factory.FromAsync(unix.BeginConnect, unix.EndConnect, endPoint, null), cancel).ConfigureAwait(false);
                        return new NetworkStream(unix, true);
                    }
                    catch (SocketException) { unix.Dispose(); } // fall back to TCP, as protocol.md says
                    catch (ObjectDisposedException) { unix.Dispose(); cancel.ThrowIfCancellationRequested(); }
                }
            }
            var client = new TcpClient(AddressFamilyOf(address.Host));
            client.NoDelay = true;
            try
            {
                await WithCancel(client.Client, client.ConnectAsync(address.Host, address.Port), cancel).ConfigureAwait(false);
            }
            catch
            {
                client.Dispose();
                throw;
            }
            Stream stream = client.GetStream();
            if (!address.Tls) return stream;
            var ssl = new SslStream(stream, false, Validator(address));
            try
            {
                await ssl.AuthenticateAsClientAsync(address.Host, null, SslProtocols.Tls12, false).ConfigureAwait(false);
            }
            catch
            {
                ssl.Dispose();
                client.Dispose();
                throw;
            }
            return ssl;
        }

        private static AddressFamily AddressFamilyOf(string host)
        {
            IPAddress ip;
            return IPAddress.TryParse(host, out ip) ? ip.AddressFamily : AddressFamily.InterNetwork;
        }

        private static async Task WithCancel(Socket socket, Task connect, CancellationToken cancel)
        {
            using (cancel.Register(socket.Dispose))
            {
                try { await connect.ConfigureAwait(false); }
                catch (ObjectDisposedException) { cancel.ThrowIfCancellationRequested(); throw; }
            }
        }

        /// <summary>An endpoint for a Unix socket path, or null where the runtime has none.</summary>
        public static EndPoint UnixEndPoint(string path)
        {
            var type = Type.GetType("System.Net.Sockets.UnixDomainSocketEndPoint, System.Net.Sockets")
                       ?? Type.GetType("System.Net.Sockets.UnixDomainSocketEndPoint")
                       ?? Type.GetType("Mono.Unix.UnixEndPoint, Mono.Posix, Version=4.0.0.0, Culture=neutral, PublicKeyToken=0738eb9f132ed756");
            if (type == null) return null;
            try { return (EndPoint)Activator.CreateInstance(type, path); }
            catch (Exception) { return null; }
        }

        private static RemoteCertificateValidationCallback Validator(DaemonAddress address)
        {
            if (address.TlsPin != null)
            {
                var pinned = ReadCertificates(address.TlsPin);
                // Pinning: exactly the daemon's own certificate, whatever host name it carries.
                return (sender, certificate, chain, errors) =>
                    certificate != null && Array.Exists(pinned, pin => SameBytes(pin.RawData, certificate.GetRawCertData()));
            }
            if (address.TlsCa != null)
            {
                var authorities = ReadCertificates(address.TlsCa);
                return (sender, certificate, chain, errors) =>
                {
                    if (certificate == null) return false;
                    if ((errors & SslPolicyErrors.RemoteCertificateNameMismatch) != 0) return false;
                    var leaf = new X509Certificate2(certificate);
                    if (Array.Exists(authorities, ca => SameBytes(ca.RawData, leaf.RawData))) return true; // the server's own certificate given as CA
                    var ownChain = new X509Chain();
                    ownChain.ChainPolicy.RevocationMode = X509RevocationMode.NoCheck;
                    ownChain.ChainPolicy.VerificationFlags = X509VerificationFlags.AllowUnknownCertificateAuthority;
                    foreach (var ca in authorities) ownChain.ChainPolicy.ExtraStore.Add(ca);
                    if (!ownChain.Build(leaf)) return false;
                    var root = ownChain.ChainElements[ownChain.ChainElements.Count - 1].Certificate;
                    return Array.Exists(authorities, ca => SameBytes(ca.RawData, root.RawData));
                };
            }
            return (sender, certificate, chain, errors) => errors == SslPolicyErrors.None;
        }

        // X509Certificate.Equals compares issuer and serial number only: pinning compares the whole certificate.
        private static bool SameBytes(byte[] a, byte[] b)
        {
            if (a == null || b == null || a.Length != b.Length) return false;
            for (var i = 0; i < a.Length; i++) if (a[i] != b[i]) return false;
            return true;
        }

        /// <summary>The certificates of a PEM file (IOException when it holds none).</summary>
        public static X509Certificate2[] ReadCertificates(string path)
        {
            var text = File.ReadAllText(path);
            var found = new System.Collections.Generic.List<X509Certificate2>();
            const string begin = "-----BEGIN CERTIFICATE-----", end = "-----END CERTIFICATE-----";
            var at = 0;
            while ((at = text.IndexOf(begin, at, StringComparison.Ordinal)) >= 0)
            {
                var stop = text.IndexOf(end, at, StringComparison.Ordinal);
                if (stop < 0) break;
                var body = text.Substring(at + begin.Length, stop - at - begin.Length);
                found.Add(new X509Certificate2(Convert.FromBase64String(body.Replace("\r", "").Replace("\n", "").Trim())));
                at = stop + end.Length;
            }
            if (found.Count == 0) throw new IOException(path + " holds no PEM certificate");
            return found.ToArray();
        }
    }
}
