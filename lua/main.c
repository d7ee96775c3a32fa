/*
** lua/main.c: the `doppler` executable (placeholder until lua/host.c lands).
*/
#include <stdio.h>

int main(void)
{
    puts("doppler " DOPPLER_VERSION);
    return 0;
}
