#!/bin/sh
# Build the C# client with Mono's compiler: the library (Toolbridge.dll), its unit tests
# (Toolbridge.Tests.exe), the conformance fixture (ConformanceApp.exe) and the example app,
# one mcs invocation each, into clients/csharp/bin/. Language level C# 7.2 (mcs's highest; inside the C# 7.3 that Unity accepts).
# When mcs is missing and this runs as root on Debian/Ubuntu, Mono is installed from the
# distribution (as dev.py installs Xvfb); otherwise it says what to install.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
out="$here/bin"

if ! command -v mcs >/dev/null 2>&1; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        echo "build.sh: installing Mono (mono-devel) from the distribution..." >&2
        apt-get update -q >/dev/null
        DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends mono-devel >/dev/null
    else
        echo "build.sh: the Mono C# compiler (mcs) is missing: install mono-devel (Debian/Ubuntu: sudo apt-get install mono-devel; see https://www.mono-project.com/download/)" >&2
        exit 2
    fi
fi

mkdir -p "$out"
flags="-langversion:7.2 -nologo -warnaserror+ -nowarn:1591 -debug- -optimize+"
mcs $flags -target:library -doc:"$out/Toolbridge.xml" -out:"$out/Toolbridge.dll" \
    -r:System.Net.Http.dll "$here"/src/*.cs
mcs $flags -target:exe -out:"$out/Toolbridge.Tests.exe" -r:"$out/Toolbridge.dll" "$here"/tests/*.cs
mcs $flags -target:exe -out:"$out/ConformanceApp.exe" -r:"$out/Toolbridge.dll" -r:Mono.Posix.dll \
    "$here"/fixtures/ConformanceApp.cs "$here"/fixtures/QuitSignal.cs
# The WinForms example (examples/csharp_notes_app).
mcs $flags -target:winexe -out:"$out/NotesApp.exe" -r:"$out/Toolbridge.dll" -r:Mono.Posix.dll \
    -r:System.Windows.Forms.dll -r:System.Drawing.dll "$here"/../../examples/csharp_notes_app/*.cs "$here"/fixtures/QuitSignal.cs
echo "build.sh: built $out"
