# toolbridge for FreeCAD: run by FreeCAD when its GUI starts (every Mod folder's InitGui.py is).
# The work is in the toolbridge_freecad package beside this file (FreeCAD puts this folder on
# sys.path); it starts once the main window and the Qt event loop are up.
import toolbridge_freecad

toolbridge_freecad.start_when_ready()
