"""The network lab's lossy wire (tests/src/rede.rs, issue 27).

This machine's kernel has no netem (CONFIG_NET_SCH_NETEM is off), so the lab degrades its links
in user space: run inside the router's namespace, this opens a TUN device; the router sends every
packet between two hosts through it (policy rules), and this process drops a share of them and
writes the others back after a random delay, normal(delay, deviation) clipped at 0, drawn per
packet. Packets of one flow then overtake each other whenever their delays cross: reordering.
Packets reach user space whole (the TUN device has no offloads: the kernel segments and
checksums them first).

    python3 fio.py <device> <loss 0..1> <delay ms> <deviation ms> <seed>

Prints `pronto` once the device exists. Commands on stdin: `contar` prints the counts as one JSON
line. Exits when stdin closes.
"""

import fcntl
import heapq
import json
import os
import random
import select
import struct
import sys
import time

TUNSETIFF = 0x400454CA
IFF_TUN = 0x0001
IFF_NO_PI = 0x1000


def main():
    nome, perda, atraso, desvio, semente = sys.argv[1:6]
    perda, atraso, desvio = float(perda), float(atraso) / 1000, float(desvio) / 1000
    fd = os.open("/dev/net/tun", os.O_RDWR)
    fcntl.ioctl(fd, TUNSETIFF, struct.pack("16sH", nome.encode(), IFF_TUN | IFF_NO_PI))
    os.set_blocking(fd, False)
    sorteio = random.Random(int(semente))
    fila = []  # (when to send, arrival order, flow, packet)
    chegadas = 0
    ultimo_por_fluxo = {}  # flow (source, destination) -> the latest arrival order sent
    contagem = {"recebidos": 0, "perdidos": 0, "entregues": 0, "fora_de_ordem": 0}
    print("pronto", flush=True)
    entrada = sys.stdin.fileno()
    while True:
        espera = max(0.0, fila[0][0] - time.monotonic()) if fila else 1.0
        prontos, _, _ = select.select([fd, entrada], [], [], espera)
        if fd in prontos:
            while True:
                try:
                    pacote = os.read(fd, 65535)
                except BlockingIOError:
                    break
                contagem["recebidos"] += 1
                if sorteio.random() < perda:
                    contagem["perdidos"] += 1
                    continue
                quando = time.monotonic() + max(0.0, sorteio.gauss(atraso, desvio))
                heapq.heappush(fila, (quando, chegadas, pacote[12:20], pacote))
                chegadas += 1
        if entrada in prontos:
            linha = sys.stdin.readline()
            if not linha:
                return
            if linha.strip() == "contar":
                print(json.dumps(contagem), flush=True)
        agora = time.monotonic()
        while fila and fila[0][0] <= agora:
            _, ordem, fluxo, pacote = heapq.heappop(fila)
            if ordem < ultimo_por_fluxo.get(fluxo, -1):
                contagem["fora_de_ordem"] += 1
            ultimo_por_fluxo[fluxo] = max(ordem, ultimo_por_fluxo.get(fluxo, -1))
            try:
                os.write(fd, pacote)
                contagem["entregues"] += 1
            except OSError:
                contagem["perdidos"] += 1


if __name__ == "__main__":
    main()
