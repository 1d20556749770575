#!/usr/bin/env python
# coding: utf-8

# Reproduce the checkpoint load failure.

# In[1]:


import sys
sys.path[:0] = ['/tmp/errkb-shapes/sgl-workspace/sglang/python', '/tmp/errkb-shapes']
import corpus_cases


# In[2]:


# Load the checkpoint
corpus_cases.trigger('neg_quanto_2d')

