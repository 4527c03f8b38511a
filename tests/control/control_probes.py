"""Shell snippets the control tests run on hosts: a TCP server that answers its node's name, and a
client that prints what the server at a target answered."""

SERVE = ("python3 -c \"import socket,sys\ns=socket.socket()\ns.setsockopt(socket.SOL_SOCKET,socket.SO_REUSEADDR,1)\n"
         "s.bind(('0.0.0.0',7000))\ns.listen(16)\nwhile True:\n c,a=s.accept()\n c.sendall(sys.argv[1].encode())\n"
         " c.close()\" {name}")
CONNECT = ("python3 -c \"import socket\nc=socket.create_connection(('{target}',7000),timeout=2)\n"
           "print(c.recv(100).decode())\"")
WAIT_LISTENING = ("i=0; until grep -q ':1B58 ' /proc/net/tcp; do sleep 0.02; i=$((i+1)); [ $i -le 250 ] || exit 1; "
                  "done")
