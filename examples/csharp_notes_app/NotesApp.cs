// A WinForms notes window whose tools an AI agent can use (issue 29's example desktop app).
//
// Build and run (Mono on Linux needs a display; without one: xvfb-run -a mono ...):
//
//     clients/csharp/build.sh
//     mono clients/csharp/bin/NotesApp.exe
//
// How it embeds toolbridge: WinForms runs its message loop on the UI thread as usual; the App
// gets the form's SynchronizationContext, so every tool runs on the UI thread, where touching
// controls is safe, while the library reads the socket (and answers heartbeats) on a background
// thread: a busy window is not a dead app. Tools: type_text, read_text, set_color, save (with
// progress), screenshot (a PNG of the window as it is on screen); the note is also a resource
// (notes://current) and a prompt (summarize), all declared with attributes.
using System;
using System.ComponentModel;
using System.Drawing;
using System.Drawing.Imaging;
using System.IO;
using System.Threading;
using System.Threading.Tasks;
using System.Windows.Forms;
using Toolbridge;

namespace Toolbridge.Examples
{
    public enum Field { title, body }

    public sealed class NotesForm : Form
    {
        public readonly TextBox Title = new TextBox { Left = 10, Top = 10, Width = 300 };
        public readonly TextBox Body = new TextBox { Left = 10, Top = 40, Width = 300, Height = 120, Multiline = true };
        public readonly Panel Swatch = new Panel { Left = 320, Top = 10, Width = 140, Height = 150, BackColor = Color.White };
        public readonly Label Status = new Label { Left = 10, Top = 170, Width = 450, Text = "No notes saved" };
        public int Saved;

        public NotesForm()
        {
            Text = "Notes";
            ClientSize = new Size(480, 200);
            FormBorderStyle = FormBorderStyle.FixedSingle;
            StartPosition = FormStartPosition.Manual;
            Location = new Point(20, 20);
            Controls.AddRange(new Control[] { Title, Body, Swatch, Status });
        }
    }

    public sealed class NotesTools
    {
        private readonly NotesForm _form;

        public NotesTools(NotesForm form) { _form = form; }

        private TextBox Box(Field field) { return field == Field.title ? _form.Title : _form.Body; }

        [Tool("Type text into a field of the Notes window (replacing what is there).", PathGuard = false)]
        public string type_text([Description("which field")] Field field, [Description("the text to type")] string text)
        {
            Box(field).Text = text.Replace("\n", Environment.NewLine);
            return Box(field).Text.Replace(Environment.NewLine, "\n");
        }

        [Tool("Read the text of a field.", ReadOnly = true)]
        public string read_text(Field field)
        {
            return Box(field).Text.Replace(Environment.NewLine, "\n");
        }

        [Tool("Paint the color swatch.")]
        public string set_color([Description("a color name (red) or #rrggbb")] string color)
        {
            Color chosen;
            try { chosen = ColorTranslator.FromHtml(color); }
            catch (Exception) { throw new ToolError("'" + color + "' is not a color: use a name like red or #rrggbb"); }
            if (chosen.IsEmpty) throw new ToolError("'" + color + "' is not a color: use a name like red or #rrggbb");
            _form.Swatch.BackColor = chosen;
            return "the swatch is " + color;
        }

        [Tool("Save the note (reports progress).")]
        public async Task<string> save(ToolContext context)
        {
            if (_form.Title.Text.Length == 0) throw new ToolError("the note has no title: type one with type_text first");
            for (var step = 1; step <= 3; step++)
            {
                context.ReportProgress(step, 3, "saving, step " + step + " of 3");
                await Task.Delay(20, context.CancellationToken); // comes back to the UI thread
            }
            _form.Saved++;
            _form.Status.Text = "Saved " + _form.Saved + " note(s); last: " + _form.Title.Text;
            return _form.Status.Text;
        }

        [Resource("notes://current", Name = "current", MimeType = "text/plain", Description = "The note in the window")]
        public string current()
        {
            return _form.Title.Text + "\n\n" + _form.Body.Text.Replace(Environment.NewLine, "\n");
        }

        [Prompt("Summarize the note in the window")]
        public string summarize([Description("how: one line, bullets, ...")] string style = "one line")
        {
            return "Summarize the note '" + _form.Title.Text + "' (" + style + "):\n\n" + _form.Body.Text.Replace(Environment.NewLine, "\n");
        }

        [Tool("A PNG screenshot of the Notes window as it is on the screen.", ReadOnly = true)]
        public ToolResult screenshot()
        {
            _form.Refresh(); // paint what the tools changed before the capture
            var area = _form.RectangleToScreen(_form.ClientRectangle);
            using (var bitmap = new Bitmap(area.Width, area.Height))
            {
                using (var graphics = Graphics.FromImage(bitmap))
                    graphics.CopyFromScreen(area.Location, Point.Empty, area.Size);
                using (var png = new MemoryStream())
                {
                    bitmap.Save(png, ImageFormat.Png);
                    return ToolResult.Image(png.ToArray(), "image/png", "Notes window, " + area.Width + "x" + area.Height + " pixels");
                }
            }
        }
    }

    public static class NotesApp
    {
        [STAThread]
        public static int Main(string[] args)
        {
            var form = new NotesForm();
            App app = null;
            var quit = new CancellationTokenSource();
            Fixtures.QuitSignal.CancelOnQuit(quit);
            quit.Token.Register(() => form.BeginInvoke((Action)form.Close));
            form.Load += (sender, e) =>
            {
                // Inside the message loop: SynchronizationContext.Current is the form's.
                app = new App("Notes", new AppOptions { InstanceId = "csharp-notes-main", SynchronizationContext = SynchronizationContext.Current });
                app.AddFrom(new NotesTools(form)); // its [Tool], [Resource] and [Prompt] methods
                app.Registered += (s, registered) => Console.WriteLine("connected " + registered.AppLabel);
                app.ProtocolError += (s, error) => Console.Error.WriteLine("notes: " + error.Code + ": " + error.Message);
                app.Start();
            };
            Application.Run(form);
            if (app != null && !app.StopAsync().Wait(3000)) Console.Error.WriteLine("notes: the connection did not close within 3 s");
            return 0;
        }
    }
}
