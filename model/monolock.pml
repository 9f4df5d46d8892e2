/*
 * monolock's safety argument as a Promela model, checked by spin.
 * model/README.md maps every process and rule to the code and the docs.
 *
 * Time is discrete: one tick is LEASE-th of a lease. The Tick process is the
 * only thing that moves time; every other action happens at an instant, and
 * an action that must happen by a deadline (a timer of the code, a frame
 * whose delay bound is reached) blocks the tick until it has happened. So
 * every duration below is an exact bound, and everything else is
 * nondeterministic: spin tries every order and every delay.
 *
 * Every process's step is one atomic block: a step is what one goroutine (or
 * the server's one owner goroutine, in one turn) does between two reads of
 * shared state, and the code's steps are that coarse too (a turn of the
 * owner, the client's session goroutine handling one event). Tick's clock
 * advance is a d_step after its nondeterministic drift choices: it is
 * deterministic, touches no channel another process blocks on, and making
 * it one transition is what keeps the state space small.
 */

/* ---- parameters: the code's values by default, a mutant is a flag ---- */

#ifndef LEASE
#define LEASE 10          /* ticks in a lease */
#endif
#ifndef GIVEUP
#define GIVEUP 80         /* the client gives up at GIVEUP% of the lease (client.clientTimeout) */
#endif
#ifndef MAX_DELAY
#define MAX_DELAY 1       /* a frame arrives 0..MAX_DELAY ticks after it was sent, in order */
#endif
#ifndef DRIFT
#define DRIFT 1           /* the most two clocks disagree on a duration, in ticks */
#endif
#ifndef STOP
#define STOP 0            /* the work stops within STOP ticks after the client lost the lock */
#endif
#ifndef CLOSE_AT_GIVEUP
#define CLOSE_AT_GIVEUP 0 /* 1: close the connection at the give-up (the bug that was fixed) */
#endif
#ifndef FIN_RELEASE
#define FIN_RELEASE 0     /* 1: the caller's release closes the connection (a client from before RELEASE) */
#endif
#ifndef CLOCK_STEP_BACK
#define CLOCK_STEP_BACK 0 /* 1: the standby's wall clock reads a second earlier than the old primary's */
#endif
#ifndef FROM_REPLY
#define FROM_REPLY 0      /* 1: give-up deadline and heartbeat interval counted from the reply, not the send */
#endif
#ifndef HB_FROM_REPLY
#define HB_FROM_REPLY 0   /* 1: only the heartbeat interval counted from the reply */
#endif
#ifndef INFLIGHT
#define INFLIGHT 1        /* requests in flight at once (the code: 1) */
#endif
#ifndef NCLIENTS
#define NCLIENTS 2
#endif
#ifndef ATTEMPTS
#define ATTEMPTS 1        /* connections each client opens, one after the other */
#endif
#ifndef FAULTS
#define FAULTS 1          /* link freezes, crashes, forced releases and failovers in one run */
#endif
#ifndef FAULT
#define FAULT 0           /* which fault may happen: 0 any, 1 client->server frozen,
                             2 server->client frozen, 3 a client crashes, 4 forced release,
                             5 failover (make model checks each on its own); with HA_ETCD
                             5 the leader's keepalives unanswered, 6 the leader stopped */
#endif
#define MAY(k) (faults > 0 && (FAULT == 0 || FAULT == k))
#ifndef FAILOVERS
#define FAILOVERS 1       /* of which failovers (restart or standby taking over) */
#endif

/* HA through etcd (-ha-etcd): the leader is elected in etcd and its failover
   is fault 5 (model/README.md, Failover through etcd) */
#ifndef HA_ETCD
#define HA_ETCD 0         /* 1: the etcd-elected leader instead of the keepalived takeover */
#endif
#ifndef TTL
#define TTL 5             /* the etcd lease's TTL, ticks */
#endif
#ifndef LEADER_GIVEUP
#define LEADER_GIVEUP 1   /* 0: the leader never ends its term on its own (known bad) */
#endif
#ifndef LEADER_WAIT
#define LEADER_WAIT 1     /* 0: a new leader grants as soon as it has won (known bad) */
#endif
#ifndef CREDIT
#define CREDIT 1          /* 1: the new leader's wait is shortened by the old leader's early stop,
                             TTL - LD_T ticks (0.2 TTL; eventloop/ha.go); 0: the whole LEASE */
#endif
#ifndef RESIGN
#define RESIGN 1          /* how the old leader's key goes: 0 only at the lease's expiry;
                             1 also by its give-up, TTL - LD_T ticks after its term ended
                             (internal/haetcd holdKey); 2 also by a give-up at once (known bad with CREDIT) */
#endif
#ifndef ERR_LOST
#define ERR_LOST 0        /* 1: with fault 5, the old leader's ERROR and close at its term's end may
                             never reach its clients (their links frozen from then on, as when a
                             shutdown's ERROR is stuck in a slow link) */
#endif
#ifndef ETCD_TOKENS
#define ETCD_TOKENS 1     /* 0: a leader's tokens come from its clock, as without HA */
#endif
#ifndef BLOCK
#define BLOCK 2           /* tokens in a block reserved in etcd */
#endif
#define LD_T ((TTL * 80) / 100) /* the leader's deadline: sentAt(newest answered keepalive) + 0.8 TTL */
#if HA_ETCD && FAILOVERS != 1
#error HA_ETCD models one election: FAILOVERS must be 1
#endif

#define GIVEUP_T ((LEASE * GIVEUP) / 100) /* client timeout in ticks */
#define BASE (LEASE / 4)                  /* longest heartbeat interval */
#define CAP (LEASE + 1)                   /* counters saturate here: no rule looks further */

/* ---- tokens: max(prev + 1, sec << 32); first grant ((sec + 1) << 32) | fraction ---- */
/* Scaled down: a "second" is SEC, a fraction step FRAC; fewer than FRAC grants per
   server process (condition 2 and 3 of docs/protocol.md, Fencing tokens). */
#define GRANTS (NCLIENTS * ATTEMPTS)
#define FRAC (GRANTS + 1)
#define SEC (2 * FRAC)
#define WALL_MAX (1 + GRANTS + FAILOVERS)

mtype = { ACQ, HB, REL, FIN, WAITING, ACQUIRED, ERR, EOF };

/* the network: one TCP connection per client at a time, a FIFO each way;
   a frame carries the ticks it may still take to arrive */
chan up[NCLIENTS] = [INFLIGHT + 1] of { mtype, byte };           /* type, ticks left */
chan down[NCLIENTS] = [INFLIGHT + 3] of { mtype, byte, byte };   /* type, token, ticks left */
bool upDead[NCLIENTS];   /* frames the client sends are lost (freeze, failover, closed) */
bool downDead[NCLIENTS]; /* frames the server sends are lost (freeze, failover, client closed) */

/* ---- the client (client/session.go, client/lock.go) ---- */
#define C_IDLE 0    /* no connection */
#define C_SENT 1    /* ACQUIRE sent, no answer yet */
#define C_WAIT 2    /* queued */
#define C_HELD 3    /* granted */
#define C_LINGER 4  /* gave up while holding: connection kept (session.linger) */
#define C_DONE 5    /* crashed, or no attempt left */
#define ACTIVE(i) (cst[i] == C_SENT || cst[i] == C_WAIT || cst[i] == C_HELD)

#define W_NONE 0 /* the work has not started for this grant */
#define W_RUN 1
#define W_STOPPING 2 /* told to stop: stops within STOP ticks */
#define W_DONE 3
#define WORKING(i) (work[i] == W_RUN || work[i] == W_STOPPING)

byte cst[NCLIENTS];
byte attempts[NCLIENTS];
byte inflight[NCLIENTS];
byte sinceSend[NCLIENTS];  /* client clock ticks since the newest send */
byte sinceAnswered[NCLIENTS]; /* client clock ticks since the send of the newest answered request */
#if HB_FROM_REPLY || FROM_REPLY
byte sinceReply[NCLIENTS]; /* client clock ticks since the newest answer */
#endif
byte slow[NCLIENTS];       /* 0..DRIFT: ticks the client's clock has lost against the server's */
byte fast[NCLIENTS];       /* 0..DRIFT: ticks it has gained */
byte work[NCLIENTS];
byte stopLeft[NCLIENTS];
byte token[NCLIENTS];      /* the token the client holds */
byte gen[NCLIENTS];        /* ghost: which grant (in real-time order) the client holds */
bool excused[NCLIENTS];    /* ghost: its lock was handed on by a forced release or a failover */
bool wrote[NCLIENTS];      /* the work of this grant has made its write (one per grant) */
byte pendingTok[NCLIENTS]; /* a write checked valid, not yet at the fence (0: none) */
byte pendingGen[NCLIENTS];

/* ---- the server (eventloop/, locktable/) ---- */
#define S_NONE 0
#define S_WAIT 1
#define S_HOLD 2
#define NOBODY 255
byte srvSess[NCLIENTS];
byte silent[NCLIENTS];     /* server ticks since lastSeen */
byte srvTok[NCLIENTS];
/* A term is one server process's lock table. Without HA a failover replaces
   the process (term 0 is reset); with HA the old leader (term 0) and the new
   one (term 1) are two processes, and each session belongs to one of them. */
#if HA_ETCD
#define TERMS 2
byte sterm[NCLIENTS];      /* the term of client i's connection */
#define TERM_OF(c) sterm[c]
#else
#define TERMS 1
#define TERM_OF(c) 0
#endif
byte holder[TERMS] = NOBODY;
chan queue[TERMS] = [NCLIENTS] of { byte };
byte last[TERMS];          /* locktable.Table.last: 0 until the process's first grant */
byte wallSec = 1;          /* the wall clock, read at grants: seconds (moves at failovers) */
byte wallFrac;             /* and the fraction of the second */

/* ---- faults and ghosts ---- */
byte faults = FAULTS;
byte failovers = FAILOVERS;
byte grants;               /* ghost: grants so far, all server processes */
byte lastGrantTok;         /* ghost: token of the newest grant, all server processes */
byte fenceMax;             /* the resource's fence: largest token admitted */
byte newestWriter;         /* ghost: the newest grant whose holder's write reached the fence */
bool crashed[NCLIENTS];    /* ghost, for the liveness property */
bool hit[NCLIENTS];        /* ghost: a fault hit this client's connection */

#if HA_ETCD
/* ---- the etcd election (internal/haetcd) and the two leaders ---- */
#define P_RUNNING 0
#define P_STOPPED 1 /* SIGSTOP: the old leader does nothing, its sockets still accept */
#define P_RESUMED 2
bool oldListens = 1;       /* the old leader's lock port accepts connections */
bool newListens;           /* the new leader's */
bool haLost;               /* the old leader's keepalives go unanswered from here on (fault 5) */
byte ldrAge;               /* ticks since the send of its newest answered keepalive; saturates at TTL + 1 */
byte pauseSt;              /* P_RUNNING, P_STOPPED or P_RESUMED: the old leader stops at most once */
bool ended;                /* the old leader's term is over: sessions ended, listener closed */
bool errLost;              /* ERR_LOST: the old leader's ERROR at its term's end never arrives */
byte keyTerm;              /* the term whose lease holds the leader key */
byte waitLeft;             /* the new leader's wait: ticks until it starts its listener */
/* tokens: the first leader's first block starts above the clock's token
   (max(0, sec << 32) + 1 with the wall clock at its first second) */
byte ceiling = SEC + BLOCK; /* etcd's /tokens: the ceiling of the last block reserved */
byte blkNext[TERMS] = SEC + 1;  /* the term's next token (term 1's set when it wins) */
byte blkHi[TERMS] = SEC + BLOCK; /* and the ceiling of its reserved tokens */
/* term s acts (reads frames, expires sessions, grants): the old leader not
   stopped, its term not over, and its deadline not passed, which every turn
   takes before anything else (eventloop: the leader deadline) */
#define LIVE(s) (s != 0 || (pauseSt != P_STOPPED && !ended && \
	!(LEADER_GIVEUP && haLost && ldrAge >= LD_T)))
#define DEADLINE_DUE (LEADER_GIVEUP && haLost && pauseSt != P_STOPPED && !ended && ldrAge >= LD_T)
/* the old leader's key goes: etcd expires its lease more than TTL after
   the send of its newest answered keepalive, or its etcd side resigns, in
   a term that ended (at ldrAge >= LD_T): RESIGN 1 holds the key until
   TTL - LD_T ticks after the deadline, RESIGN 2 not at all */
#if RESIGN == 2
#define KEY_GONE (ldrAge > TTL || ended)
#elif RESIGN == 1
#define KEY_GONE (ldrAge > TTL || (ended && ldrAge >= TTL))
#else
#define KEY_GONE (ldrAge > TTL)
#endif
#define ELECTION_DUE (keyTerm == 0 && haLost && KEY_GONE)
#define URGENT_HA (DEADLINE_DUE || ELECTION_DUE)
#define LISTENING (oldListens || newListens)
#else
#define LIVE(s) 1
#define URGENT_HA 0
#define LISTENING 1
#endif

/* Scratch variables of one atomic step. No step blocks half-way, so no two
   steps share them, and they are hidden: not part of the state, so that a
   value left over from an earlier step does not make two states differ.
   Hidden variables are not restored when the search backtracks, so none is
   read after a nondeterministic choice that follows its assignment: every
   choice inside a step comes before them (Tick keeps its own in the state). */
hidden mtype x_m, x_m2;
hidden byte x_t, x_h, x_n, x_dl, x_c, x_t2, x_d2, x_s; /* x_s: the term of a server step */
hidden byte x_now; /* real time in ticks, for the trail's printouts only */

/* ---- the network's rules ---- */
inline sendUp(i, x_m) {
	if
	:: upDead[i] -> skip
	:: else -> up[i]!x_m, MAX_DELAY
	fi
}
inline sendDown(i, x_m, x_t) {
	if
	:: downDead[i] -> skip
	:: else -> down[i]!x_m, x_t, MAX_DELAY
	fi
}
inline drain(ch) {
	do
	:: nempty(ch) -> ch?_, _
	:: empty(ch) -> break
	od
}
inline drainDown(i) {
	do
	:: nempty(down[i]) -> down[i]?_, _, _
	:: empty(down[i]) -> break
	od
}
#define DUE_UP(i) (up[i]?[ACQ, 0] || up[i]?[HB, 0] || up[i]?[REL, 0] || up[i]?[FIN, 0])
#define DUE_DOWN(i) (down[i]?[WAITING, _, 0] || down[i]?[ACQUIRED, _, 0] || down[i]?[ERR, _, 0] || down[i]?[EOF, _, 0])

/* An action that must happen x_now: time cannot pass until it has. */
#define URGENT_CLIENT(i) ( \
	(DUE_UP(i) && LIVE(TERM_OF(i))) || DUE_DOWN(i) || \
	(ACTIVE(i) && sinceAnswered[i] >= GIVEUP_T) || \
	(ACTIVE(i) && cst[i] != C_SENT && inflight[i] == 0 && HB_DUE(i)) || \
	(cst[i] == C_LINGER && (!WORKING(i) || sinceSend[i] >= LEASE)) || \
	(work[i] == W_STOPPING && stopLeft[i] == 0) || \
	(srvSess[i] != S_NONE && silent[i] > LEASE && LIVE(TERM_OF(i))))

#if HB_FROM_REPLY || FROM_REPLY
#define HB_DUE(i) (sinceReply[i] >= BASE)
#define HB_MAY(i) (sinceReply[i] >= BASE)
#else
#define HB_DUE(i) (sinceSend[i] >= BASE)
#define HB_MAY(i) (sinceSend[i] >= BASE)
#endif

#if NCLIENTS == 2
#define URGENT (URGENT_CLIENT(0) || URGENT_CLIENT(1) || URGENT_HA)
#define OTHER_WORKS(i) (WORKING(1 - i) && !excused[1 - i])
#elif NCLIENTS == 3
#define URGENT (URGENT_CLIENT(0) || URGENT_CLIENT(1) || URGENT_CLIENT(2) || URGENT_HA)
#define OTHER_WORKS(i) ((i != 0 && WORKING(0) && !excused[0]) || \
	(i != 1 && WORKING(1) && !excused[1]) || (i != 2 && WORKING(2) && !excused[2]))
#else
#error NCLIENTS must be 2 or 3
#endif

/* ---- the server's rules ---- */

/* The wall clock moves only at a failover, by any number of seconds: the
   tokens' order, all the rules read of them, is the same whatever seconds
   one process's grants read (model/README.md, Abstractions), so only what
   a new process reads against the old one's tokens needs choices. */
inline wallMoves() {
	do
	:: break
	:: wallSec < WALL_MAX -> wallSec++; wallFrac = 0
	od
}

/* grant makes c the holder of term x_s's lock with a fresh token:
   locktable.NextToken, or with HA the term's block reserved in etcd. */
inline grant(x_c) {
#if HA_ETCD && ETCD_TOKENS
	x_t = blkNext[x_s];
	assert(x_t <= blkHi[x_s]); /* not a property: BLOCK covers a term's grants (README) */
	blkNext[x_s]++;
	/* half the block used: reserve the next one, in a Txn guarded by the
	   term's leader key (refused once the key is gone) */
	if
	:: blkHi[x_s] + 1 - blkNext[x_s] <= BLOCK / 2 && keyTerm == x_s ->
		ceiling = ceiling + BLOCK; blkHi[x_s] = ceiling
	:: else
	fi;
#else
	if
	:: last[x_s] == 0 -> x_t = (wallSec + 1) * SEC + wallFrac * FRAC
	:: last[x_s] != 0 && last[x_s] + 1 >= wallSec * SEC -> x_t = last[x_s] + 1
	:: last[x_s] != 0 && last[x_s] + 1 < wallSec * SEC -> x_t = wallSec * SEC
	fi;
	last[x_s] = x_t;
#endif
	/* property 2: tokens strictly increase across grants, across failovers too */
	assert(x_t > lastGrantTok);
	lastGrantTok = x_t;
	printf("t=%d server: grant to client %d, token %d\n", x_now, x_c, x_t);
	holder[x_s] = x_c;
	srvSess[x_c] = S_HOLD;
	srvTok[x_c] = x_t;
	grants++;
	if
	:: cst[x_c] != C_DONE -> gen[x_c] = grants; excused[x_c] = 0
	:: else /* a finished client reads neither */
	fi
}

/* release ends x_c's session (of term x_s) and hands the lock on at once:
   eventloop/release.go forget, locktable.Table.Release. */
inline release(x_c) {
	if
	:: srvSess[x_c] == S_HOLD ->
		holder[x_s] = NOBODY;
		if
		:: nempty(queue[x_s]) -> queue[x_s]?x_h; grant(x_h); sendDown(x_h, ACQUIRED, x_t)
		:: empty(queue[x_s]) -> skip
		fi
	:: srvSess[x_c] == S_WAIT -> /* leaves the queue, the others keep their order */
		x_n = len(queue[x_s]);
		do
		:: x_n > 0 -> queue[x_s]?x_h; if :: x_h != x_c -> queue[x_s]!x_h :: else fi; x_n--
		:: x_n == 0 -> break
		od
	:: else
	fi;
	srvSess[x_c] = S_NONE;
	srvTok[x_c] = 0
}

/* receive handles a frame of client c (eventloop/frames.go handle, and the close). */
inline receive(x_c) {
	up[x_c]?x_m, x_dl;
	x_s = TERM_OF(x_c);
	if
	:: srvSess[x_c] == S_NONE && x_m == ACQ ->
		silent[x_c] = 0;
		if
		:: holder[x_s] == NOBODY -> grant(x_c); sendDown(x_c, ACQUIRED, x_t)
		:: else -> queue[x_s]!x_c; srvSess[x_c] = S_WAIT; sendDown(x_c, WAITING, 0)
		fi
	:: srvSess[x_c] != S_NONE && x_m == HB ->
		silent[x_c] = 0; /* lastSeen = x_now */
		if
		:: srvSess[x_c] == S_HOLD -> sendDown(x_c, ACQUIRED, srvTok[x_c])
		:: else -> sendDown(x_c, WAITING, 0)
		fi
	:: srvSess[x_c] != S_NONE && x_m == FIN -> release(x_c) /* graceful: a FIN or an RST */
	:: srvSess[x_c] != S_NONE && x_m == REL -> /* RELEASE: released, and the server closes first */
		release(x_c); sendDown(x_c, EOF, 0); downDead[x_c] = 1
	:: else -> skip /* a frame of a connection the server has closed */
	fi
}

#define SERVER_RECEIVE(x_c) :: atomic { nempty(up[x_c]) && LIVE(TERM_OF(x_c)) -> receive(x_c) }
#define SERVER_EXPIRE(x_c) :: atomic { srvSess[x_c] != S_NONE && silent[x_c] > LEASE && \
	LIVE(TERM_OF(x_c)) -> \
	printf("t=%d server: client %d expired\n", x_now, x_c); \
	x_s = TERM_OF(x_c); \
	sendDown(x_c, EOF, 0); downDead[x_c] = 1; release(x_c) }

#if HA_ETCD
/* endTerm: the old leader's deadline has passed (or it finds it passed when
   it resumes, before anything else): every session gets ERROR 0x01, nothing
   is granted, the listener closes (connections still in its backlog are
   reset). Frames on their way to it are lost. */
inline endTerm() {
	printf("t=%d old leader: deadline passed, term ends\n", x_now);
	x_c = 0;
	do
	:: x_c < NCLIENTS ->
		if
		:: sterm[x_c] == 0 && (ACTIVE(x_c) || cst[x_c] == C_LINGER) && !errLost ->
			if
			:: srvSess[x_c] != S_NONE -> sendDown(x_c, ERR, 0)
			:: else -> sendDown(x_c, EOF, 0)
			fi
		:: else
		fi;
		if
		:: sterm[x_c] == 0 ->
			upDead[x_c] = 1; downDead[x_c] = 1; drain(up[x_c]);
			srvSess[x_c] = S_NONE; srvTok[x_c] = 0; silent[x_c] = 0
		:: else
		fi;
		x_c++
	:: x_c == NCLIENTS -> break
	od;
	holder[0] = NOBODY;
	do
	:: nempty(queue[0]) -> queue[0]?_
	:: empty(queue[0]) -> break
	od;
	blkNext[0] = 0; blkHi[0] = 0; /* dead: term 0 grants no more */
	oldListens = 0;
	pauseSt = P_RESUMED; /* a running and a resumed leader's ended terms are one state */
	ended = 1
}
#endif

active proctype Server() {
end:
	do
	SERVER_RECEIVE(0)
	SERVER_RECEIVE(1)
#if NCLIENTS == 3
	SERVER_RECEIVE(2)
#endif
	/* lease expiry: x_now - lastSeen > lease (eventloop/timers.go onTimer) */
	SERVER_EXPIRE(0)
	SERVER_EXPIRE(1)
#if NCLIENTS == 3
	SERVER_EXPIRE(2)
#endif
	/* forced release by an administrator (eventloop/admin_calls.go ForceRelease) */
	:: atomic { MAY(4) && holder[0] != NOBODY && LIVE(0) -> /* HA: the faults are apart, fault 5 alone */
		faults--;
		x_s = 0;
		x_c = holder[0];
		printf("t=%d server: forced release of client %d\n", x_now, x_c);
		excused[x_c] = 1;
		hit[x_c] = 1;
		sendDown(x_c, ERR, 0);
		downDead[x_c] = 1;
		release(x_c) }
#if HA_ETCD
	/* fault 5 with HA: from now on the old leader's keepalives go unanswered
	   (a partition from etcd, or the process stopped next). In the worst
	   case etcd received the newest answered one the moment it was sent, so
	   etcd's lease and the leader's deadline both count from here. */
	:: atomic { MAY(5) && !haLost ->
		faults--;
		printf("t=%d fault: the leader's keepalives go unanswered\n", x_now);
		if
		:: ERR_LOST -> errLost = 1
		:: true
		fi;
		haLost = 1;
		ldrAge = 0 }
	/* fault 6 with HA: the old leader's process stops (SIGSTOP; never
	   resuming is a crash whose sockets stay silent). Its newest answered
	   keepalive was sent any time within its deadline before: since then it
	   served as usual, which is what fault 5's runs do until the deadline. */
	:: atomic { MAY(6) && !haLost ->
		faults--;
		haLost = 1;
		pauseSt = P_STOPPED;
		ldrAge = 0;
		do
		:: break
		:: ldrAge < LD_T - 1 -> ldrAge++
		od;
		printf("t=%d fault: the old leader stops, %d ticks after its newest answered keepalive\n", x_now, ldrAge) }
	:: atomic { pauseSt == P_STOPPED ->
		printf("t=%d old leader: resumed\n", x_now);
		pauseSt = P_RESUMED;
		/* the first turn takes the deadline first */
		if
		:: LEADER_GIVEUP && ldrAge >= LD_T -> endTerm()
		:: else
		fi }
	/* the deadline, also with the loop idle (its timer) */
	:: atomic { DEADLINE_DUE -> endTerm() }
	/* etcd has expired the old leader's lease (more than TTL since the send
	   of its newest answered keepalive): another node wins the election and
	   reserves its first block above every block. At once: a later election
	   only starts the new leader later, which clients that connect later
	   already cover (model/README.md) */
	:: atomic { ELECTION_DUE ->
		keyTerm = 1;
		printf("t=%d etcd: the old leader's key is gone; a new leader wins\n", x_now);
#if ETCD_TOKENS
		/* the clock a second later: its token is above the ceiling and
		   decides; CLOCK_STEP_BACK: a second earlier, the ceiling decides */
#if CLOCK_STEP_BACK
		wallSec = wallSec - 1; wallFrac = 0;
#else
		wallSec++; wallFrac = 0;
#endif
		x_t = (ceiling > wallSec * SEC -> ceiling : wallSec * SEC) + 1;
		blkNext[1] = x_t;
		blkHi[1] = x_t + BLOCK - 1;
		ceiling = blkHi[1];
#else
		wallMoves();
#if CLOCK_STEP_BACK
		wallSec = wallSec - 1; wallFrac = 0;
#else
		if
		:: wallFrac = wallFrac + 1
		:: wallSec < WALL_MAX -> wallSec++; wallFrac = 0
		fi;
#endif
#endif
		/* it waits the largest lease ever granted (stored in etcd before
		   that grant) from the moment it won, less the credit: the old
		   leader stopped TTL - LD_T ticks before its key could go */
		if
		:: LEADER_WAIT -> waitLeft = LEASE - CREDIT * (TTL - LD_T)
		:: else -> newListens = 1
		fi }
#else
	/* a restart or a failover to a standby: a new process with an empty table,
	   its connections gone silently (the worst case: no EOF tells the clients) */
	:: atomic { MAY(5) && failovers > 0 ->
		wallMoves(); /* before the choice below: the seconds since the last read */
		faults--;
		failovers--;
		printf("t=%d server: failover\n", x_now);
		x_c = 0;
		do
		:: x_c < NCLIENTS ->
			if
			:: srvSess[x_c] != S_NONE -> hit[x_c] = 1; upDead[x_c] = 1; downDead[x_c] = 1;
				drain(up[x_c]); drainDown(x_c)
			:: else
			fi;
			if
			:: srvSess[x_c] == S_HOLD -> excused[x_c] = 1
			:: else
			fi;
			srvSess[x_c] = S_NONE;
			srvTok[x_c] = 0;
			silent[x_c] = 0;
			x_c++
		:: x_c == NCLIENTS -> break
		od;
		holder[0] = NOBODY;
		do
		:: nempty(queue[0]) -> queue[0]?_
		:: empty(queue[0]) -> break
		od;
		last[0] = 0;
#if CLOCK_STEP_BACK
		wallSec = wallSec - 1; wallFrac = 0
#else
		/* the clock did not step back: the standby's first grant is later */
		if
		:: wallFrac = wallFrac + 1
		:: wallSec < WALL_MAX -> wallSec++; wallFrac = 0
		fi
#endif
	}
#endif
	od
}

/* ---- the client's rules ---- */

/* acknowledged: the answer to the request in flight (session.acknowledged). */
inline acknowledged() {
	inflight[i]--;
#if FROM_REPLY
	sinceAnswered[i] = 0;
#else
	sinceAnswered[i] = sinceSend[i];
#endif
#if HB_FROM_REPLY || FROM_REPLY
	sinceReply[i] = 0
#endif
}

/* stopWork: the loss reaches the work (Lock.end); it stops within STOP ticks. */
inline stopWork() {
	if
	:: work[i] == W_RUN -> work[i] = W_STOPPING; stopLeft[i] = STOP;
		printf("t=%d client %d: work told to stop\n", x_now, i)
	:: work[i] == W_NONE -> work[i] = W_DONE
	:: else
	fi
}

/* finish: the client is done for good. Whatever only its own rules read
   is reset, so that no finished client's leftovers split the other's states
   (model/README.md, Abstractions: dead values). */
inline finish() {
	cst[i] = C_DONE;
	work[i] = W_DONE;
	attempts[i] = 0;
	inflight[i] = 0;
	token[i] = 0;
	wrote[i] = 0;
	slow[i] = 0;
	fast[i] = 0;
	stopLeft[i] = 0;
	gen[i] = 0;
	excused[i] = 0
}

/* closeConn: the client closes its connection; the server sees a FIN. */
inline closeConn() {
	printf("t=%d client %d: close\n", x_now, i);
	sendUp(i, FIN);
	upDead[i] = 1;
	downDead[i] = 1;
	drainDown(i);
	cst[i] = C_IDLE
}

/* releaseConn: the caller's release, RELEASE (client.Lock.Close). The
   frames before it are answered in order, and the server frees the lock when
   it reads it; it is data, so TCP retransmits it, and only a frozen link
   loses it, after which the server's expiry frees the lock. The client takes
   nothing more from this connection: the server's close, which it awaits
   (bounded by the lease, then an RST), changes nothing the rules read. */
inline releaseConn() {
	printf("t=%d client %d: RELEASE\n", x_now, i);
	sendUp(i, REL);
	upDead[i] = 1;
	downDead[i] = 1;
	drainDown(i);
	cst[i] = C_IDLE
}

/* giveUp: no answer for GIVEUP_T after the send of the newest answered request. */
inline giveUp() {
	printf("t=%d client %d: give up\n", x_now, i);
	stopWork();
	if
	:: cst[i] == C_HELD && !CLOSE_AT_GIVEUP -> cst[i] = C_LINGER
	:: else -> closeConn()
	fi
}

/* startWork: the grant; the work starts at once (the earliest, so the worst
   case for property 1: a later start only shortens any overlap). */
inline startWork(x_t) {
	cst[i] = C_HELD;
	token[i] = x_t;
	/* property 1: no two clients work at once, unless the lock was handed
	   on by a forced release or a failover */
	printf("t=%d client %d: granted token %d, work starts\n", x_now, i, x_t);
	assert(excused[i] || !OTHER_WORKS(i));
	work[i] = W_RUN
}

proctype Client(byte i) {
end:
	do
	/* connect and ACQUIRE; a new connection once the old session is gone */
	:: atomic { cst[i] == C_IDLE && attempts[i] < ATTEMPTS && srvSess[i] == S_NONE && empty(up[i]) &&
		LISTENING ->
#if HA_ETCD
		/* to a node whose lock port listens (a follower's refuses) */
		if
		:: oldListens -> sterm[i] = 0
		:: newListens -> sterm[i] = 1
		fi;
#endif
		attempts[i]++;
		upDead[i] = 0;
		downDead[i] = 0;
		work[i] = W_NONE;
		wrote[i] = 0;
		token[i] = 0;
		printf("t=%d client %d: connect, ACQUIRE\n", x_now, i);
		sendUp(i, ACQ);
		inflight[i] = 1;
		sinceSend[i] = 0;
		sinceAnswered[i] = 0; /* the confirmation clock runs from the ACQUIRE on */
#if HB_FROM_REPLY || FROM_REPLY
		sinceReply[i] = 0;
#endif
		cst[i] = C_SENT }
	:: atomic { cst[i] == C_IDLE && attempts[i] == ATTEMPTS && !WORKING(i) -> finish() }

	/* the permanent reader: every frame is read as soon as it arrives */
	:: atomic { nempty(down[i]) -> down[i]?x_m, x_t, x_dl;
		printf("t=%d client %d: reads %e\n", x_now, i, x_m);
		if
		:: x_m == ERR || x_m == EOF -> /* the server has let go: close at once */
			if
			:: ACTIVE(i) || cst[i] == C_LINGER -> stopWork(); closeConn()
			:: else
			fi
		:: else ->
			if
			:: ACTIVE(i) && sinceAnswered[i] >= GIVEUP_T -> giveUp() /* too late to count */
			:: ACTIVE(i) && sinceAnswered[i] < GIVEUP_T ->
				if
				:: x_m == WAITING && cst[i] != C_HELD && inflight[i] > 0 ->
					cst[i] = C_WAIT; acknowledged()
				:: x_m == ACQUIRED && cst[i] == C_SENT ->
					acknowledged(); startWork(x_t)
				:: x_m == ACQUIRED && cst[i] == C_WAIT -> /* the pushed promotion */
					startWork(x_t)
				:: x_m == ACQUIRED && cst[i] == C_HELD && x_t == token[i] && inflight[i] > 0 ->
					acknowledged()
				:: else -> giveUp() /* a frame that breaks the rules: like silence */
				fi
			:: else -> skip /* lingering: nothing revives the lock */
			fi
		fi }

	/* the give-up rule */
	:: atomic { ACTIVE(i) && sinceAnswered[i] >= GIVEUP_T -> giveUp() }

	/* the heartbeat schedule: lease/4 after the send (the RTT only shortens
	   it, which the safety argument does not depend on), at most INFLIGHT in
	   flight; when the answer comes later, at once after it */
	:: atomic { (cst[i] == C_WAIT || cst[i] == C_HELD) && inflight[i] < INFLIGHT && HB_MAY(i) &&
		sinceAnswered[i] < GIVEUP_T ->
		printf("t=%d client %d: HEARTBEAT\n", x_now, i);
		sendUp(i, HB);
		inflight[i]++;
		sinceSend[i] = 0 }

	/* a write, checked by Lock.Valid; the process may pause (SIGSTOP) right
	   after the check, so the write reaches the fence any time later */
	:: atomic { work[i] == W_RUN && cst[i] == C_HELD && sinceAnswered[i] < GIVEUP_T &&
		!wrote[i] ->
		wrote[i] = 1;
		printf("t=%d client %d: Valid, write with token %d (may pause here)\n", x_now, i, token[i]);
		pendingTok[i] = token[i];
		pendingGen[i] = gen[i] }
	/* the work ends and the caller closes the lock: a release */
	:: atomic { cst[i] == C_HELD && work[i] != W_STOPPING ->
		work[i] = W_DONE;
#if FIN_RELEASE
		closeConn() /* a client from before RELEASE */
#else
		releaseConn()
#endif
	}
	/* told to stop, the work stops within STOP ticks */
	:: atomic { work[i] == W_STOPPING -> work[i] = W_DONE;
		printf("t=%d client %d: work stopped\n", x_now, i) }
	/* after a give-up: close once the work has stopped or the lease has
	   passed since the last send (session.linger) */
	:: atomic { cst[i] == C_LINGER && (!WORKING(i) || sinceSend[i] >= LEASE) -> closeConn() }

	/* faults */
	:: atomic { MAY(1) && (ACTIVE(i) || cst[i] == C_LINGER) && !upDead[i] ->
		printf("t=%d fault: client %d -> server frozen\n", x_now, i);
		faults--; hit[i] = 1; upDead[i] = 1; drain(up[i]) }        /* client->server frozen */
	:: atomic { MAY(2) && (ACTIVE(i) || cst[i] == C_LINGER) && !downDead[i] ->
		printf("t=%d fault: server -> client %d frozen\n", x_now, i);
		faults--; hit[i] = 1; downDead[i] = 1; drainDown(i) }      /* server->client frozen */
	:: atomic { MAY(3) && cst[i] != C_DONE ->                   /* the process dies */
		faults--;
		printf("t=%d fault: client %d crashes\n", x_now, i);
		crashed[i] = 1;
		hit[i] = 1;
		if
		:: WORKING(i) -> work[i] = W_DONE
		:: else
		fi;
		if
		:: cst[i] != C_IDLE -> closeConn() /* the kernel closes its socket */
		:: cst[i] != C_IDLE -> upDead[i] = 1; downDead[i] = 1; drain(up[i]); drainDown(i) /* its host is gone */
		:: else
		fi;
		finish() }
	od
}

/* the resource: a fence admits a token >= the largest it admitted (fence.Memory) */
/* land: client x_c's write reaches the resource. Property 2: no write of an
   older holder is admitted after a newer holder's first write. */
#define LAND(x_c) :: atomic { pendingTok[x_c] != 0 -> \
	if \
	:: pendingTok[x_c] >= fenceMax -> \
		printf("t=%d fence: admits token %d of client %d\n", x_now, pendingTok[x_c], x_c); \
		assert(pendingGen[x_c] >= newestWriter); \
		fenceMax = pendingTok[x_c] \
	:: else -> printf("t=%d fence: rejects token %d of client %d\n", x_now, pendingTok[x_c], x_c) \
	fi; \
	if \
	:: pendingGen[x_c] > newestWriter -> newestWriter = pendingGen[x_c] \
	:: else \
	fi; \
	pendingTok[x_c] = 0; pendingGen[x_c] = 0 }

active proctype Fence() {
end:
	do
	LAND(0)
	LAND(1)
#if NCLIENTS == 3
	LAND(2)
#endif
	od
}

#define ADVANCE(x, d) x = (x + d > CAP -> CAP : x + d)

/* Tick: time passes when nothing is due. Each client's clock advances by
   1, or by 0 or 2 while it stays within DRIFT of the server's: any interval
   the client measures is off by at most DRIFT ticks. */
active proctype Tick() {
	byte x_c, x_adv[NCLIENTS]; /* in the state: the drift choices below come after them */
end:
	do
	:: atomic { !URGENT ->
		x_c = 0;
		do
		:: x_c < NCLIENTS ->
			x_adv[x_c] = 1;
#if DRIFT > 0
			/* a client's clock runs slow (loses up to DRIFT ticks) or fast
			   (gains up to DRIFT), one way per run; only while its timers run */
			if
			:: ACTIVE(x_c) || cst[x_c] == C_LINGER ->
				if
				:: skip
				:: slow[x_c] < DRIFT && fast[x_c] == 0 -> x_adv[x_c] = 0; slow[x_c]++
				:: fast[x_c] < DRIFT && slow[x_c] == 0 -> x_adv[x_c] = 2; fast[x_c]++
				fi
			:: else
			fi;
#endif
			x_c++
		:: x_c == NCLIENTS -> break
		od;
		d_step {
			x_now++;
			x_c = 0;
			do
			:: x_c < NCLIENTS ->
				/* a counter moves only while a rule reads it, so that states
				   that differ only in a stale counter are one state */
				if
				:: ACTIVE(x_c) || cst[x_c] == C_LINGER ->
					ADVANCE(sinceSend[x_c], x_adv[x_c]);
					ADVANCE(sinceAnswered[x_c], x_adv[x_c]);
#if HB_FROM_REPLY || FROM_REPLY
					ADVANCE(sinceReply[x_c], x_adv[x_c]);
#endif
				:: else -> sinceSend[x_c] = 0; sinceAnswered[x_c] = 0
				fi;
				if
				:: srvSess[x_c] != S_NONE -> ADVANCE(silent[x_c], 1)
				:: else -> silent[x_c] = 0
				fi;
				if
				:: work[x_c] == W_STOPPING -> stopLeft[x_c]--
				:: else
				fi;
				x_n = len(up[x_c]);
				do /* a frame to a stopped leader waits in its socket, delay 0 */
				:: x_n > 0 -> up[x_c]?x_m2, x_d2; up[x_c]!x_m2, (x_d2 > 0 -> x_d2 - 1 : 0); x_n--
				:: x_n == 0 -> break
				od;
				x_n = len(down[x_c]);
				do
				:: x_n > 0 -> down[x_c]?x_m2, x_t2, x_d2; down[x_c]!x_m2, x_t2, x_d2 - 1; x_n--
				:: x_n == 0 -> break
				od;
				x_adv[x_c] = 0;
				x_c++
			:: x_c == NCLIENTS -> break
			od;
			x_c = 0;
#if HA_ETCD
			if
			:: haLost && ldrAge <= TTL -> ldrAge++
			:: else
			fi;
			if
			:: waitLeft > 0 ->
				waitLeft--;
				if
				:: waitLeft == 0 -> newListens = 1;
					printf("t=%d new leader: waited, listens\n", x_now)
				:: else
				fi
			:: else
			fi
#endif
		}
	}
	od
}

init {
	atomic {
		run Client(0);
		run Client(1);
#if NCLIENTS == 3
		run Client(2);
#endif
	}
}

/* Property 3, liveness: once the holder has crashed or released, a waiter
   that no fault hit is granted (checked with weak fairness: pan -a -f). */
ltl granted {
	[] ((cst[1] == C_WAIT && !hit[1] && (crashed[0] || srvSess[0] == S_NONE)) -> <> (cst[1] == C_HELD || hit[1]))
}
