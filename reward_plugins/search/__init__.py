"""The server side of the multi-turn search stack: a BM25 retriever in Search-R1's protocol.

- :mod:`reward_plugins.search.corpus` reads and checks a corpus in Search-R1's JSON Lines format;
- :mod:`reward_plugins.search.index` builds an on-disk BM25 index of it once (tantivy) and opens
  it memory-mapped;
- :mod:`reward_plugins.search.server` answers ``POST /retrieve`` from such an index.

``reward-plugins retriever index`` and ``reward-plugins retriever serve`` run them. The search
tool that calls the server from verl's agent loop is :mod:`reward_plugins.tools.search`. The
package needs ``pip install 'reward-plugins[search]'`` only when an index is built or opened.
"""
