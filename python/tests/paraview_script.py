"""Run by ParaView's own Python (pvbatch, test_xdmf.py): opens an XDMF file as ParaView's users
do, writes what it read -- the time steps and, at each, every point array -- as JSON, and
renders one frame of an array to a PNG.

    pvbatch paraview_script.py FILE.xmf OUT.json ARRAY FRAME.png
"""

import json
import sys

from paraview import servermanager
from paraview.simple import (ColorBy, GetActiveViewOrCreate, ResetCamera, SaveScreenshot, Show,
                             XDMFReader)
from vtk.util.numpy_support import vtk_to_numpy

xdmf, out, array, frame = sys.argv[1:5]
reader = XDMFReader(FileNames=[xdmf])
times = list(reader.TimestepValues)
steps = []
for time in times:
    reader.UpdatePipeline(time)
    data = servermanager.Fetch(reader)
    points = data.GetPointData()
    steps.append({
        "time": time,
        "dimensions": list(data.GetDimensions()),
        "arrays": {points.GetArrayName(i): vtk_to_numpy(points.GetArray(i)).tolist()
                   for i in range(points.GetNumberOfArrays())},
    })
with open(out, "w") as f:
    json.dump({"times": times, "steps": steps}, f)

view = GetActiveViewOrCreate("RenderView")
view.ViewTime = times[-1]
display = Show(reader, view)
ColorBy(display, ("POINTS", array))
display.RescaleTransferFunctionToDataRange(True)
# VTK's XDMF reader lays a 2-D mesh in the y-z plane (its x is the missing dimension): looked
# at along x, whatever the mesh's dimensions.
view.CameraPosition = [1, 0, 0]
view.CameraFocalPoint = [0, 0, 0]
view.CameraViewUp = [0, 0, 1]
ResetCamera(view)
SaveScreenshot(frame, view, ImageResolution=[320, 240])
