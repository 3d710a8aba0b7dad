using System.Reflection;
using System.Runtime.CompilerServices;

[assembly: AssemblyTitle("Toolbridge")]
[assembly: AssemblyDescription("toolbridge app client: offer a .NET app's tools, resources and prompts to AI agents")]
[assembly: AssemblyVersion("0.1.0.0")]
[assembly: InternalsVisibleTo("Toolbridge.Tests")]
