"""The HTML report opens in a real headless Chromium and the screenshot shows the charts."""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import torch

import gradtrace
from tests.watch.models import TwoHead, train

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser") or \
    shutil.which("google-chrome")


def _colours(png: Path) -> tuple[int, set[tuple[int, int, int]]]:
    """Count of non-white pixels and the set of distinct colours (stdlib PNG decoder)."""
    import struct
    import zlib

    data = png.read_bytes()
    pos, chunks = 8, []
    width = height = ctype = 0
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            width, height, _, ctype = struct.unpack(">IIBB", body[:10])
        elif kind == b"IDAT":
            chunks.append(body)
        pos += n + 12
    bpp = 4 if ctype == 6 else 3
    raw = zlib.decompress(b"".join(chunks))
    stride = width * bpp
    prev = bytearray(stride)
    ink, colours = 0, set()
    for y in range(height):
        f = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b, c = prev[i], prev[i - bpp] if i >= bpp else 0
            if f == 1:
                line[i] = (line[i] + a) & 255
            elif f == 2:
                line[i] = (line[i] + b) & 255
            elif f == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        prev = line
        if y % 4:
            continue
        for x in range(0, width, 4):
            px = tuple(line[x * bpp:x * bpp + 3])
            if px != (255, 255, 255):
                ink += 1
                colours.add(px)  # type: ignore[arg-type]
    return ink, colours


@pytest.mark.skipif(CHROMIUM is None, reason="chromium not installed (apt-get install chromium)")
def test_html_report_renders_charts_in_headless_chromium(tmp_path: Path) -> None:
    torch.manual_seed(0)
    m = TwoHead()
    opt = torch.optim.SGD(m.parameters(), lr=0.05)
    with gradtrace.watch(m, opt) as w:
        train(m, opt, 15, d_in=8, d_out=2)
    html = w.report.save_html(tmp_path / "report.html")
    shot = tmp_path / "shot.png"
    cmd = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu",
           "--disable-background-networking", "--disable-component-update", "--disable-sync",
           "--no-first-run", f"--user-data-dir={tmp_path / 'profile'}",
           f"--screenshot={shot}", "--window-size=1000,1300", html.as_uri()]
    proc = subprocess.run(cmd, capture_output=True, timeout=120)
    assert shot.exists(), proc.stderr.decode(errors="replace")[-2000:]
    ink, colours = _colours(shot)
    assert ink > 2000  # not blank
    # the viridis heat map and the bar colours are on screen, not just black text
    assert any(abs(r - 31) < 12 and abs(g - 119) < 12 and abs(b - 180) < 12
               for r, g, b in colours), "blue max|g| bars missing"
    assert len(colours) > 40
