/* The benchmark servers' listening socket (wsbench.c, deflatebench.c): 127.0.0.1:port
 * (0: a free one), announced as the first stdout line "PORT <n>". Returns -1 on failure. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <sys/socket.h>

static int listen_loopback(int port) {
    int s = socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(s, (struct sockaddr *)&a, sizeof a) < 0 || listen(s, 4) < 0) return -1;
    socklen_t al = sizeof a;
    getsockname(s, (struct sockaddr *)&a, &al);
    printf("PORT %d\n", ntohs(a.sin_port));
    fflush(stdout);
    return s;
}
