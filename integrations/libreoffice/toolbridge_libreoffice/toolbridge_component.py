"""The extension's UNO component: starts toolbridge with the office, shows its state.

LibreOffice loads this file with its Python loader (manifest.xml), which also puts the
``pythonpath/`` folder next to it on ``sys.path``; the work is in ``toolbridge_office``.
``Jobs.xcu`` runs :meth:`ToolbridgeJob.execute` on the OnStartApp event (the office has
started); ``Addons.xcu``'s menu entry (Tools > Add-Ons) calls :meth:`ToolbridgeJob.trigger`.
"""

import unohelper
from com.sun.star.task import XJob, XJobExecutor

IMPLEMENTATION = "org.toolbridge.libreoffice.Job"


class ToolbridgeJob(unohelper.Base, XJob, XJobExecutor):
    def __init__(self, ctx):
        self.ctx = ctx

    def execute(self, args):  # XJob: OnStartApp
        import toolbridge_office

        toolbridge_office.start(self.ctx)
        return None

    def trigger(self, command):  # XJobExecutor: the menu entry
        import toolbridge_office

        if command == "status":
            toolbridge_office.show_status(self.ctx)


g_ImplementationHelper = unohelper.ImplementationHelper()
g_ImplementationHelper.addImplementation(ToolbridgeJob, IMPLEMENTATION, ("com.sun.star.task.Job",))
