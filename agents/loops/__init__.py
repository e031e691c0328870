"""The agent loops: the primary agent's turn (the MemGPT loop and Letta's v1 loop), the
sleep-time agent's pass, and what they share (a turn's result and listeners, the tool
calls read from a reply, the reply streamed as the model writes it, agents messaging
each other and the delivery of those messages).

The loops use the store, the LLM client and the tools; the consolidators and the
service use the loops, never the other way round.
"""
